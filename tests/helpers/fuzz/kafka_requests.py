"""Fuzz target: the Kafka request decoder, as the server uses it (logserver/dispatch.py).

An input is one request frame without its 4-byte size prefix. Properties:

- decoding returns a header and a body, or raises the codec's ProtocolError (DecodeError,
  UnknownApiKeyError, UnsupportedVersionError); never IndexError, struct.error,
  MemoryError, RecursionError or anything else;
- a decoded request re-encodes (EncodeError would mean the decoder accepted a value the
  encoder cannot write) and decodes again to the same header and fields;
- the consumer-protocol subscription inside a JoinGroup (parsed by the group coordinator)
  is a set of topic names or None, never an exception.

Seeds: every API key and version the server serves, fully populated and with nulls
(tests/helpers/kafka_samples.py), Produce carrying real record batches of each codec.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from helpers.kafka_samples import sample, to_plain
from kafkaproto import (
    ApiKey,
    DecodeError,
    EncodeError,
    ProtocolError,
    decode_request,
    decode_request_header,
    encode_request,
)
from kafkaproto.batch import Compression
from kafkaproto.records import build_batch
from logserver.groups.group import parse_subscription_topics
from logserver.handlers import HANDLERS

PACKAGES = ("kafkaproto", "logserver.groups.group")


def served() -> Iterator[tuple[int, int]]:
    """(api key, version) of every request the server decodes."""
    for key, handler in sorted(HANDLERS.items()):
        for version in range(handler.min_version, handler.max_version + 1):
            yield int(key), version


def _subscription(topics: list[str], version: int = 1) -> bytes:
    out = bytearray(struct.pack(">hi", version, len(topics)))
    for topic in topics:
        raw = topic.encode()
        out += struct.pack(">h", len(raw)) + raw
    out += struct.pack(">i", 3) + b"ud!"  # user data
    if version >= 1:
        out += struct.pack(">i", 1) + struct.pack(">h", 3) + b"abc" + struct.pack(">ii", 1, 0)
    return bytes(out)


def _with_real_payloads(key: int, body: object, seed: int) -> None:
    if key == ApiKey.PRODUCE:
        codecs = list(Compression)
        for t, topic in enumerate(body.topic_data):  # type: ignore[attr-defined]
            for p, part in enumerate(topic.partition_data):
                codec = codecs[(seed + t + p) % len(codecs)]
                records = [(b"key-%d" % i, b"value-%d" % i * 3, [("h", b"v")], 1_700_000_000_000 + i)
                           for i in range(1 + p)]
                part.records = build_batch(records, compression=codec)
    elif key == ApiKey.JOIN_GROUP:
        for protocol in body.protocols:  # type: ignore[attr-defined]
            protocol.metadata = _subscription(["orders", "payments-é"], version=seed % 2)


def seeds() -> Iterator[bytes]:
    correlation = 0
    for key, version in served():
        cls = HANDLERS_SPEC_REQUEST[key]
        for seed, nulls in ((0, False), (1, True)):
            body = sample(cls, version, nulls=nulls, seed=seed)
            _with_real_payloads(key, body, seed)
            correlation += 1
            client_id = None if nulls else f"fuzz-seed-{key}-{version}"
            yield encode_request(key, version, correlation, client_id, body)[4:]


def _request_class(key: int) -> type:
    from kafkaproto import API_SPECS

    return API_SPECS[key].request


HANDLERS_SPEC_REQUEST = {key: _request_class(key) for key in HANDLERS}


def test_one_input(data: bytes) -> None:
    try:
        header, offset = decode_request_header(data)
    except DecodeError:
        return
    handler = HANDLERS.get(header.api_key)
    if handler is None or not handler.min_version <= header.api_version <= handler.max_version:
        return  # the dispatcher closes the connection (or answers ApiVersions v0)
    try:
        body = decode_request(header, data, offset)
    except ProtocolError:
        return
    if header.api_key == ApiKey.JOIN_GROUP:
        for protocol in body.protocols:  # type: ignore[attr-defined]
            topics = parse_subscription_topics(protocol.metadata)
            assert topics is None or all(isinstance(t, str) for t in topics)
    try:
        frame = encode_request(header.api_key, header.api_version, header.correlation_id,
                               header.client_id, body)
    except EncodeError as exc:
        raise AssertionError(f"decoded request does not re-encode: {exc}") from exc
    again, offset2 = decode_request_header(frame[4:])
    assert again == header, (again, header)
    body2 = decode_request(again, frame[4:], offset2)
    before = repr(to_plain(body, header.api_version))
    after = repr(to_plain(body2, header.api_version))
    assert before == after, f"round trip changed the request:\n{before}\n{after}"


def instrumented_extra() -> list[object]:
    """The generated decoders and encoders (compiled at run time, so not seen at import)."""
    funcs: list[object] = []
    for key, version in served():
        cls = HANDLERS_SPEC_REQUEST[key]
        funcs.append(cls.decoder(version))
        funcs.append(cls.encoder(version))
    return funcs


if __name__ == "__main__":
    from helpers.fuzz.common import main

    main(seeds, test_one_input, PACKAGES, instrumented_extra)
