"""Fuzz target: the record-batch validator (kafkaproto/validate.py), the compiled record walk
(kafkaproto/_recordwalk.c) against its Python reference, decompress_capped, and decode_batch
(what the cleaner, the bridge's fetcher and ``logserver check`` read batches with).

The first input byte picks what the rest is (the ``MODE_*`` constants):

- a whole batch: its length field and CRC are recomputed by the harness, so mutations of
  counts, deltas, lengths and compressed payloads reach the record walk (as a hostile
  client's CRC-valid batch would). validate_batch returns or raises CorruptBatchError /
  InvalidRecordError; a batch it accepts decodes with decode_batch to exactly its declared
  records; the C and Python walks agree on its (decompressed) payload.
- a record payload and a count: the C and Python walks return the same tuple, and an OK
  walk means decode_batch's parser reads the same records.
- a compressed payload for one codec: decompress_capped returns at most the cap or raises
  DecompressionError (DecompressionBombError past the cap); when it succeeds the uncapped
  decompress agrees.
- the records of a Fetch response as the bridge's downlink reads them
  (mqtt_bridge.kafka_fetcher.decode_from): never an exception (a bad batch is reported and
  skipped, so delivery goes on), the next offset never goes backwards.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from crc32c import crc32c

from helpers.batchforge import forge, raw_record
from helpers.bombs import raw_snappy_claiming, zeros_bomb
from kafkaproto.batch import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    LOG_OVERHEAD,
    Compression,
    CorruptBatchError,
    InvalidRecordError,
    parse_header,
)
from kafkaproto.compression import (
    DecompressionBombError,
    DecompressionError,
    compress,
    decompress,
    decompress_capped,
)
from kafkaproto.records import build_batch, decode_batch
from kafkaproto.validate import _walk_python

try:
    from kafkaproto._recordwalk import walk as compiled_walk
except ImportError:  # pragma: no cover - the walk agreement checks need the extension
    compiled_walk = None

PACKAGES = ("kafkaproto.validate", "kafkaproto.compression", "kafkaproto.records",
            "kafkaproto.batch", "kafkaproto.varint", "mqtt_bridge.kafka_fetcher")

#: Decompression cap of the harness: small, so that a bomb costs little time per input.
CAP = 64 * 1024
MODE_BATCH, MODE_WALK, MODE_DECOMPRESS, MODE_FETCHED = 0, 1, 2, 3
REJECT_NULL_KEYS = 0x04
_CODECS = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
_LENGTH = struct.Struct(">i")
_COUNT = struct.Struct(">H")


def _fix_length_and_crc(batch: bytearray) -> bytearray:
    """What a hostile client does after mutating a batch: make it CRC-valid again."""
    if len(batch) >= BATCH_HEADER_SIZE:
        _LENGTH.pack_into(batch, 8, len(batch) - LOG_OVERHEAD)
        struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[21:]))
    return batch


def _records(n: int, *, null_keys: bool = False, headers: int = 0) -> list:
    return [
        (None if null_keys and i % 2 else b"key-%d" % i, b"value " * (i + 1),
         [(f"h{j}", b"x" * j if j else None) for j in range(headers)], 1_700_000_000_000 + 7 * i)
        for i in range(n)
    ]


def _batches() -> Iterator[bytes]:
    for codec in Compression:
        yield build_batch(_records(1), compression=codec)
        yield build_batch(_records(5, headers=2), compression=codec)
        yield build_batch(_records(3, null_keys=True), compression=codec)
        yield build_batch([(b"k", None, [], 5), (None, b"v" * 200, [("é", b"")], 1)],
                          compression=codec, producer_id=7, producer_epoch=1, base_sequence=0)
    # CRC-valid batches that only the record walk refuses (tests/helpers/batchforge.py)
    yield forge(raw_record(offset_delta=0) + raw_record(offset_delta=5), record_count=2)
    yield forge(raw_record(offset_delta=0, key_length=90), record_count=1)
    yield forge(raw_record(offset_delta=0, header_count=3), record_count=1)
    yield forge(raw_record(offset_delta=0, length_adjust=2) + b"\x00\x00", record_count=1)
    yield forge(raw_record(offset_delta=0, headers=[(None, b"v")]), record_count=1)
    yield forge(raw_record(offset_delta=0, timestamp_delta=-5), record_count=1)
    yield forge(raw_record(offset_delta=0) * 2, record_count=2, compression=Compression.ZSTD)
    yield forge(b"\x00" * 40, record_count=1)


def _payloads() -> Iterator[tuple[int, bytes]]:
    for batch in _batches():
        header = parse_header(batch)
        body = memoryview(batch)[BATCH_HEADER_SIZE:]
        codec = header.attributes & COMPRESSION_MASK
        try:
            data = decompress(Compression(codec), body) if codec else bytes(body)
        except DecompressionError:
            continue
        yield header.record_count, data


def _compressed() -> Iterator[tuple[Compression, bytes]]:
    payload = b"".join(data for _, data in _payloads())
    for codec in _CODECS:
        yield codec, compress(codec, payload)
        yield codec, compress(codec, b"")
        yield codec, compress(codec, payload[:100]) + compress(codec, payload[100:300])
        yield codec, zeros_bomb(codec, 2 << 20)
    yield Compression.SNAPPY, bytes(__import__("cramjam").snappy.compress_raw(payload))
    yield Compression.SNAPPY, raw_snappy_claiming(1 << 30)
    yield Compression.ZSTD, __import__("zstandard").ZstdCompressor(
        write_content_size=True, write_checksum=True).compress(payload)


def seeds() -> Iterator[bytes]:
    for batch in _batches():
        yield bytes([MODE_BATCH]) + bytes(batch)
        yield bytes([MODE_BATCH | REJECT_NULL_KEYS]) + bytes(batch)
    for count, data in _payloads():
        yield bytes([MODE_WALK]) + _COUNT.pack(count) + data
    for codec, data in _compressed():
        yield bytes([MODE_DECOMPRESS | (codec << 4)]) + data
    batches = [bytearray(b) for b in _batches()]
    for i, batch in enumerate(batches):
        struct.pack_into(">q", batch, 0, 10 * i)  # consecutive base offsets, as in a log
    fetched = b"".join(batches)
    for start in (0, 1, 35):
        yield bytes([MODE_FETCHED, start]) + fetched[: len(fetched) - start]


def _compare_walks(data: bytes, count: int, reject_null_keys: bool) -> tuple:
    expected = _walk_python(data, count, reject_null_keys)
    if compiled_walk is not None:
        got = compiled_walk(data, count, reject_null_keys)
        assert got == expected, f"C walk {got} != Python walk {expected} (count {count})"
    return expected


def _check_batch(batch: bytearray, reject_null_keys: bool) -> None:
    from kafkaproto.validate import validate_batch

    _fix_length_and_crc(batch)
    try:
        checked = validate_batch(batch, max_uncompressed_bytes=CAP,
                                 reject_null_keys=reject_null_keys)
    except (CorruptBatchError, InvalidRecordError):
        checked = None
    if len(batch) >= BATCH_HEADER_SIZE:
        header = parse_header(batch) if batch[16] == 2 else None
        if header is not None and header.record_count >= 0 and header.size == len(batch):
            codec = header.attributes & COMPRESSION_MASK
            body = memoryview(batch)[BATCH_HEADER_SIZE:]
            try:
                data = bytes(body) if codec == 0 else decompress_capped(Compression(codec), body, CAP)
            except (DecompressionError, ValueError):
                data = None
            if data is not None:
                _compare_walks(data, header.record_count, reject_null_keys)
    try:
        decoded = decode_batch(batch, max_uncompressed_bytes=CAP)
    except (CorruptBatchError, InvalidRecordError):
        decoded = None
    if checked is None:
        return
    assert checked.uncompressed_size <= CAP
    assert decoded is not None, "validate_batch accepted a batch decode_batch refuses"
    header, records = decoded
    assert len(records) == header.record_count
    assert [r.offset - header.base_offset for r in records] == list(range(header.record_count))
    if reject_null_keys:
        assert all(r.key is not None for r in records)
    if not header.attributes & 0x08:
        assert max(r.timestamp for r in records) == checked.max_timestamp


def _check_walk(raw: bytes, reject_null_keys: bool) -> None:
    if len(raw) < 2:
        return
    (count,) = _COUNT.unpack_from(raw)
    data = raw[2:]
    result = _compare_walks(data, count, reject_null_keys)
    if result[0] == 0 and count:
        from kafkaproto.records import _parse_records

        records, used = _parse_records(data, count, 0, 0, None)
        assert used == len(data) and len(records) == count
        assert [r.offset for r in records] == list(range(count))


def _check_decompress(codec: Compression, data: bytes) -> None:
    try:
        out = decompress_capped(codec, data, CAP)
    except DecompressionBombError:
        return
    except DecompressionError:
        return
    assert len(out) <= CAP, f"decompress_capped returned {len(out)} bytes past the cap {CAP}"
    try:
        full = decompress(codec, data)
    except DecompressionError:
        return  # the capped reader is the more lenient one here; not a safety problem
    assert full == out, f"{codec.name}: capped output differs from the full decompression"


def _check_fetched(raw: bytes) -> None:
    from mqtt_bridge.kafka_fetcher import decode_from

    if not raw:
        return
    position = raw[0]
    bad: list[int] = []
    records, next_offset = decode_from(raw[1:], position, lambda offset, exc: bad.append(offset))
    assert next_offset >= position
    assert all(r.offset >= position for r in records)


def test_one_input(data: bytes) -> None:
    if not data:
        return
    flags = data[0]
    mode = flags & 0x03
    reject_null_keys = bool(flags & REJECT_NULL_KEYS)
    if mode == MODE_WALK:
        _check_walk(data[1:], reject_null_keys)
    elif mode == MODE_DECOMPRESS:
        _check_decompress(_CODECS[(flags >> 4) & 3], data[1:])
    elif mode == MODE_FETCHED:
        _check_fetched(data[1:])
    else:
        _check_batch(bytearray(data[1:]), reject_null_keys)


if __name__ == "__main__":
    import logging

    from helpers.fuzz.common import main

    logging.getLogger("mqtt_bridge").setLevel(logging.CRITICAL)  # skipped batches are the point

    main(seeds, test_one_input, PACKAGES)
