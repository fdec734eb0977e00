"""Cross-check against an independent codec: kafka-python 3.0.12's JSON-driven classes.

For every API/version both sides declare, bytes we encode must decode with
kafka-python to the same values, and bytes kafka-python encodes must decode
with ours to the same values (and be byte-identical to ours). Values are
compared as nested dicts, mapping fields positionally among the fields present
in that version, so kafka-python's renames (``authorized_operations``) need no
per-API code.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from helpers.kafka_samples import sample, to_plain

from kafkaproto import API_SPECS, ApiKey, ApiSpec
from kafkaproto.codegen import Message, Struct

kafka_protocol = pytest.importorskip("kafka.protocol.api_message")
from kafka.protocol import admin, consumer, metadata, producer, sasl  # noqa: E402
from kafka.protocol.schemas.fields.codecs import BitField  # noqa: E402

INT32_MIN = -(2**31)


def _kafka_python_classes() -> dict[tuple[int, bool], Any]:
    found: dict[tuple[int, bool], Any] = {}
    base = kafka_protocol.ApiMessage
    for module in (admin, consumer, metadata, producer, sasl):
        for name in dir(module):
            obj = getattr(module, name)
            if isinstance(obj, type) and issubclass(obj, base) and obj is not base:
                found[(obj.API_KEY, obj.is_request())] = obj
    return found


KP = _kafka_python_classes()

CASES = [
    pytest.param(spec, cls, KP[(spec.api_key, cls.IS_REQUEST)], v, id=f"{cls.__name__}-v{v}")
    for spec in API_SPECS.values()
    for cls in (spec.request, spec.response)
    if (spec.api_key, cls.IS_REQUEST) in KP
    for v in range(spec.min_version, spec.max_version + 1)
    if v <= KP[(spec.api_key, cls.IS_REQUEST)].max_version
]


def _kp_fields(kp_struct: Any, version: int) -> list[Any]:
    return [f for f in kp_struct.fields.values() if f.for_version_q(version)]


def _our_fields(cls: type[Struct], version: int) -> list[Any]:
    return [f for f in cls._fields if version in f.versions]


def _bits_to_int(bits: set[int] | None) -> int:
    if bits is None:
        return INT32_MIN
    value = sum(1 << b for b in bits)
    return value - (1 << 32) if value >= 1 << 31 else value


def _int_to_bits(value: int) -> set[int] | None:
    if value == INT32_MIN:
        return None
    return {b for b in range(32) if (value & 0xFFFFFFFF) >> b & 1}


def kp_to_plain(kobj: Any, cls: type[Struct], version: int) -> dict[str, Any]:
    """kafka-python object -> the dict shape of :func:`support.kafka_samples.to_plain`."""
    kfields = _kp_fields(kobj._struct, version)
    ofields = _our_fields(cls, version)
    assert [f.name for f in kfields] != [] or not ofields
    assert len(kfields) == len(ofields), (cls.__name__, kfields, ofields)
    out: dict[str, Any] = {}
    for kf, of in zip(kfields, ofields, strict=True):
        value = getattr(kobj, kf.name)
        if value is not None and of.is_struct:
            sub = cls._children[of.attr]
            if of.is_array:
                value = [kp_to_plain(v, sub, version) for v in value]
            else:
                value = kp_to_plain(value, sub, version)
        elif getattr(kf, "_type", None) is BitField:
            value = _bits_to_int(value)
        elif isinstance(value, uuid.UUID):
            value = value.bytes
        elif value is None and of.type == "uuid":
            value = bytes(16)
        elif isinstance(value, memoryview | bytearray):
            value = bytes(value)
        out[of.attr] = value
    return out


def kp_build(kcls: Any, obj: Struct, version: int) -> Any:
    """Our object -> an equivalent kafka-python object of class ``kcls``."""
    kfields = _kp_fields(kcls._struct, version)
    ofields = _our_fields(type(obj), version)
    assert len(kfields) == len(ofields)
    kwargs: dict[str, Any] = {}
    for kf, of in zip(kfields, ofields, strict=True):
        value = getattr(obj, of.attr)
        if value is not None and of.is_struct:
            if of.is_array:
                value = [kp_build(kf.data_class, v, version) for v in value]
            else:
                value = kp_build(kf.data_class, value, version)
        elif getattr(kf, "_type", None) is BitField:
            value = _int_to_bits(value)
        elif of.type == "uuid":
            value = uuid.UUID(bytes=value)
        kwargs[kf.name] = value
    return kcls(version=version, **kwargs)


def _sample(cls: type[Message], version: int, nulls: bool) -> Message:
    obj = sample(cls, version, nulls=nulls)
    if cls.API_KEY == ApiKey.API_VERSIONS and not cls.IS_REQUEST:
        # kafka-python decodes any ApiVersions error reply as v0 (KIP-511 fallback).
        obj.error_code = 0  # type: ignore[attr-defined]
    return obj


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize(("spec", "cls", "kcls", "version"), CASES)
def test_ours_decode_with_kafka_python(
    spec: ApiSpec, cls: type[Message], kcls: Any, version: int, nulls: bool
) -> None:
    obj = _sample(cls, version, nulls)
    data = obj.encode(version)
    decoded = kcls.decode(data, version=version)
    assert kp_to_plain(decoded, cls, version) == to_plain(obj, version)


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize(("spec", "cls", "kcls", "version"), CASES)
def test_kafka_python_decode_with_ours(
    spec: ApiSpec, cls: type[Message], kcls: Any, version: int, nulls: bool
) -> None:
    obj = _sample(cls, version, nulls)
    kobj = kp_build(kcls, obj, version)
    data = bytes(kobj.encode(version=version))
    back = cls.decode(data, version)
    assert to_plain(back, version) == to_plain(obj, version)
    assert data == obj.encode(version)


@pytest.mark.parametrize(("spec", "cls", "kcls", "version"), CASES)
def test_framed_with_headers(spec: ApiSpec, cls: type[Message], kcls: Any, version: int) -> None:
    """Whole frames (size + header + body) agree in both directions, incl. KIP-511 header v0."""
    from kafkaproto import (
        decode_request,
        decode_request_header,
        decode_response,
        encode_request,
        encode_response,
    )

    obj = _sample(cls, version, nulls=False)
    kobj = kp_build(kcls, obj, version)
    kobj.with_header(correlation_id=4242, client_id="kp-client")
    kframe = bytes(kobj.encode(header=True, framed=True))  # version set at construction
    if cls.IS_REQUEST:
        ours = encode_request(spec.api_key, version, 4242, "kp-client", obj)
        assert ours == kframe
        header, offset = decode_request_header(kframe[4:])
        assert header.client_id == "kp-client" and header.correlation_id == 4242
        assert decode_request(header, kframe[4:], offset) == obj
    else:
        chunks = encode_response(spec.api_key, version, 4242, obj)
        assert b"".join(chunks) == kframe  # type: ignore[arg-type]
        correlation_id, back = decode_response(spec.api_key, version, kframe[4:])
        assert correlation_id == 4242 and back == obj


# APIs kafka-python (3.0.12) does not implement: checked on the wire with a real client
# instead (ConsumerGroupHeartbeat/Describe: librdkafka's KIP-848 consumer in
# tests/integration/test_groups_consumer_protocol.py; Envelope, which only brokers send:
# tests/cluster/test_rest_forward_acls.py).
NOT_IN_KAFKA_PYTHON = {ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE,
                       ApiKey.ENVELOPE}


def test_cross_check_coverage() -> None:
    """Every declared API is covered on both sides for its whole declared range."""
    for spec in API_SPECS.values():
        if spec.api_key in NOT_IN_KAFKA_PYTHON:
            assert (spec.api_key, True) not in KP, "kafka-python has it now: cross-check it"
            continue
        for cls in (spec.request, spec.response):
            kcls = KP.get((spec.api_key, cls.IS_REQUEST))
            assert kcls is not None, cls.__name__
            assert kcls.max_version >= spec.max_version, cls.__name__
