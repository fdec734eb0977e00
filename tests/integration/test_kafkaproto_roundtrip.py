"""Every declared message version survives encode -> decode, alone and inside frames."""

from __future__ import annotations

import pytest
from helpers.kafka_samples import sample, to_plain

from kafkaproto import (
    API_SPECS,
    ApiSpec,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    precompile,
)
from kafkaproto.codegen import Message

CASES = [
    pytest.param(spec, cls, v, id=f"{cls.__name__}-v{v}")
    for spec in API_SPECS.values()
    for cls in (spec.request, spec.response)
    for v in range(spec.min_version, spec.max_version + 1)
]

VARIANTS = [
    pytest.param({"nulls": False}, id="values"),
    pytest.param({"nulls": True}, id="nulls"),
    pytest.param({"array_len": 0}, id="empty"),
    pytest.param({"array_len": 3, "seed": 7}, id="seed7"),
]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(("spec", "cls", "version"), CASES)
def test_body_round_trip(
    spec: ApiSpec, cls: type[Message], version: int, variant: dict[str, object]
) -> None:
    obj = sample(cls, version, **variant)  # type: ignore[arg-type]
    data = obj.encode(version)
    back = cls.decode(data, version)
    assert back == obj
    assert to_plain(back, version) == to_plain(obj, version)
    # Encoding is deterministic and decode consumed exactly the bytes written.
    assert back.encode(version) == data
    _obj, end = cls.decoder(version)(memoryview(data), 0)
    assert end == len(data)


@pytest.mark.parametrize(("spec", "cls", "version"), CASES)
def test_frame_round_trip(spec: ApiSpec, cls: type[Message], version: int) -> None:
    obj = sample(cls, version)
    if cls.IS_REQUEST:
        frame = encode_request(spec.api_key, version, 12345, "client-é", obj)
        assert int.from_bytes(frame[:4], "big", signed=True) == len(frame) - 4
        header, offset = decode_request_header(frame[4:])
        assert (header.api_key, header.api_version) == (spec.api_key, version)
        assert header.correlation_id == 12345
        assert header.client_id == "client-é"
        assert decode_request(header, memoryview(frame)[4:], offset) == obj
    else:
        chunks = encode_response(spec.api_key, version, -7, obj)
        assert len(chunks) == 1 and isinstance(chunks[0], bytes)
        frame = chunks[0]
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        correlation_id, back = decode_response(spec.api_key, version, frame[4:])
        assert correlation_id == -7
        assert back == obj


def test_declared_ranges() -> None:
    expected = {
        18: (0, 4), 3: (0, 12), 0: (0, 9), 1: (0, 16), 2: (0, 10), 22: (0, 4),
        19: (0, 7), 20: (0, 6), 32: (0, 4),
        10: (0, 4), 11: (0, 9), 14: (0, 5), 12: (0, 4), 13: (0, 5), 8: (0, 9), 9: (0, 9),
        16: (0, 5), 15: (0, 5), 42: (0, 2), 47: (0, 0), 37: (0, 3), 23: (0, 4),
        29: (0, 3), 30: (0, 3), 31: (0, 3),
        21: (0, 2), 33: (0, 2), 35: (0, 4), 44: (0, 1),
        17: (0, 1), 36: (0, 2), 50: (0, 0), 51: (0, 0),
        24: (0, 3), 25: (0, 3), 26: (0, 3), 27: (0, 1), 28: (0, 3), 61: (0, 0), 65: (0, 0),
        66: (0, 1),  # transactions
        60: (0, 1),  # DescribeCluster
        68: (0, 1), 69: (0, 1),  # KIP-848 consumer groups
        45: (0, 0), 46: (0, 0),  # partition reassignment
        58: (0, 0),  # Envelope (KIP-590): a REST produce forwarded as its caller
    }  # fmt: skip
    assert set(API_SPECS) == set(expected)
    for key, (lo, hi) in expected.items():
        spec = API_SPECS[key]
        assert (spec.min_version, spec.max_version) == (lo, hi), spec.name


def test_precompile() -> None:
    assert precompile({0: (3, 9), 999: (0, 1)}) == 4 * 7  # request+response, encode+decode
    assert precompile() == 4 * sum(s.max_version - s.min_version + 1 for s in API_SPECS.values())
