"""Unit tests of kafkaproto.batch: header parsing, in-place patching, produce validation."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kafkaproto.batch import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
    Compression,
    CorruptBatchError,
    InvalidRecordError,
    TimestampType,
    compute_crc,
    iter_batches,
    parse_header,
    peek_offset_and_size,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_produce_records,
    verify_crc,
)
from kafkaproto.records import build_batch, decode_batch

RECORDS = [
    (b"k0", b"v0", [], 1_000),
    (None, b"v1", [("h", b"x")], 1_005),
    (b"k2", None, [], 998),
]


def make_batch(**kwargs: object) -> bytearray:
    """A three-record batch, writable, built by our encoder."""
    return bytearray(build_batch(RECORDS, **kwargs))  # type: ignore[arg-type]


def patch(buf: bytearray, offset: int, fmt: str, value: int, *, fix_crc: bool = True) -> None:
    """Overwrite one header field, then (by default) make the CRC valid again."""
    struct.pack_into(fmt, buf, offset, value)
    if fix_crc:
        struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))


def test_constants() -> None:
    assert (LOG_OVERHEAD, BATCH_HEADER_SIZE, MAGIC_V2) == (12, 61, 2)
    assert [c.value for c in Compression] == [0, 1, 2, 3, 4]
    assert [t.value for t in TimestampType] == [0, 1]
    assert issubclass(CorruptBatchError, ValueError)
    assert issubclass(InvalidRecordError, ValueError)


def test_parse_header_fields_and_properties() -> None:
    buf = make_batch(
        base_offset=100,
        producer_id=42,
        producer_epoch=3,
        base_sequence=7,
        partition_leader_epoch=5,
        compression=Compression.GZIP,
        is_transactional=True,
    )
    h = parse_header(buf)
    assert isinstance(h, BatchHeader)
    assert h.base_offset == 100
    assert h.length == len(buf) - LOG_OVERHEAD
    assert h.size == len(buf)
    assert h.partition_leader_epoch == 5
    assert h.magic == 2
    assert h.crc == crc32c(bytes(buf[21:]))
    assert h.last_offset_delta == 2
    assert h.record_count == 3
    assert h.base_timestamp == 1_000
    assert h.max_timestamp == 1_005
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (42, 3, 7)
    assert h.last_offset == 102
    assert h.next_offset == 103
    assert h.compression is Compression.GZIP
    assert h.timestamp_type is TimestampType.CREATE_TIME
    assert h.is_transactional
    assert not h.is_control
    assert h.has_producer_id
    assert h.last_sequence == 9


def test_parse_header_at_position_and_from_any_buffer_type() -> None:
    buf = b"\xff" * 7 + bytes(make_batch(base_offset=9))
    for view in (buf, bytearray(buf), memoryview(buf)):
        assert parse_header(view, 7).base_offset == 9


def test_header_defaults() -> None:
    h = parse_header(make_batch())
    assert h.compression is Compression.NONE
    assert not h.is_transactional
    assert not h.has_producer_id
    assert h.producer_id == -1
    assert h.last_sequence == -1  # NO_SEQUENCE stays NO_SEQUENCE


@pytest.mark.parametrize(
    ("base", "delta", "expected"),
    [(0, 0, 0), (10, 4, 14), (2**31 - 1, 0, 2**31 - 1), (2**31 - 1, 1, 0), (2**31 - 3, 5, 2)],
)
def test_last_sequence_wraps_like_kafka(base: int, delta: int, expected: int) -> None:
    h = parse_header(make_batch())._replace(base_sequence=base, last_offset_delta=delta)
    assert h.last_sequence == expected


def test_parse_header_rejects_short_buffer() -> None:
    buf = make_batch()
    with pytest.raises(CorruptBatchError, match="61"):
        parse_header(buf[:60])
    with pytest.raises(CorruptBatchError):
        parse_header(buf, len(buf) - 10)


def test_parse_header_rejects_bad_magic_and_length() -> None:
    buf = make_batch()
    bad = bytearray(buf)
    bad[16] = 1
    with pytest.raises(CorruptBatchError, match="magic 1"):
        parse_header(bad)
    bad = bytearray(buf)
    patch(bad, 8, ">i", 48, fix_crc=False)
    with pytest.raises(CorruptBatchError, match="length 48"):
        parse_header(bad)
    patch(bad, 8, ">i", 49, fix_crc=False)
    assert parse_header(bad).size == 61


def test_unknown_codec_property_raises() -> None:
    buf = make_batch()
    patch(buf, 21, ">h", 5)
    with pytest.raises(ValueError):
        _ = parse_header(buf).compression


def test_peek_offset_and_size() -> None:
    buf = make_batch(base_offset=77)
    assert peek_offset_and_size(buf) == (77, len(buf))
    assert peek_offset_and_size(buf[:12]) == (77, len(buf))
    assert peek_offset_and_size(b"xx" + bytes(buf), 2) == (77, len(buf))
    with pytest.raises(CorruptBatchError):
        peek_offset_and_size(buf[:11])


def test_compute_and_verify_crc() -> None:
    buf = make_batch()
    h = parse_header(buf)
    assert compute_crc(buf, 0, h) == h.crc
    assert compute_crc(buf, 0, h.size) == h.crc
    assert compute_crc(memoryview(buf), 0, h.size) == h.crc
    assert verify_crc(buf)
    assert verify_crc(bytes(buf), 0, h)
    shifted = b"\x00" * 3 + bytes(buf)
    assert compute_crc(shifted, 3, h.size) == h.crc
    assert verify_crc(shifted, 3)
    buf[-1] ^= 0x01
    assert not verify_crc(buf)
    with pytest.raises(CorruptBatchError):
        compute_crc(buf[:-1], 0, h)
    assert not verify_crc(buf[:-1], 0, h)


def test_crc_covers_attributes_but_not_offset_length_epoch() -> None:
    buf = make_batch()
    patch(buf, 0, ">q", 123456, fix_crc=False)
    patch(buf, 12, ">i", 99, fix_crc=False)
    assert verify_crc(buf)
    patch(buf, 21, ">h", 1, fix_crc=False)
    assert not verify_crc(buf)


def test_iter_batches() -> None:
    a = bytes(make_batch(base_offset=0))
    b = bytes(make_batch(base_offset=3, compression=Compression.ZSTD))
    buf = a + b
    got = list(iter_batches(buf))
    assert [pos for pos, _ in got] == [0, len(a)]
    assert [h.base_offset for _, h in got] == [0, 3]
    assert got[1][1].compression is Compression.ZSTD
    assert list(iter_batches(b"")) == []
    assert [p for p, _ in iter_batches(buf, len(a))] == [len(a)]
    assert [p for p, _ in iter_batches(buf, 0, len(a))] == [0]


@pytest.mark.parametrize("cut", [1, 5, 11, 12, 30, 60, 61, 70])
def test_iter_batches_stops_silently_at_trailing_partial_batch(cut: int) -> None:
    a = bytes(make_batch())
    buf = a + a[:cut]
    assert [p for p, _ in iter_batches(buf)] == [0]
    assert [p for p, _ in iter_batches(memoryview(buf))] == [0]


def test_iter_batches_raises_on_garbage_length_or_magic() -> None:
    a = make_batch()
    bad = bytearray(a)
    patch(bad, 8, ">i", -5, fix_crc=False)
    with pytest.raises(CorruptBatchError):
        list(iter_batches(bytes(a) + bytes(bad)))
    bad = bytearray(a)
    bad[16] = 1
    with pytest.raises(CorruptBatchError, match="magic"):
        list(iter_batches(bytes(a) + bytes(bad)))


def test_iter_batches_rejects_end_past_buffer() -> None:
    with pytest.raises(ValueError):
        list(iter_batches(b"", 0, 5))


@pytest.mark.parametrize("codec", list(Compression))
def test_set_base_offset_and_epoch_keep_crc_valid(codec: Compression) -> None:
    buf = make_batch(compression=codec)
    crc_before = parse_header(buf).crc
    set_base_offset(buf, 0, 1_234_567_890_123)
    set_partition_leader_epoch(buf, 0, 17)
    h = parse_header(buf)
    assert h.base_offset == 1_234_567_890_123
    assert h.partition_leader_epoch == 17
    assert h.crc == crc_before
    assert verify_crc(buf)
    records = decode_batch(buf)[1]
    assert [r.offset for r in records] == [1_234_567_890_123 + i for i in range(3)]
    validate_produce_records(buf)


def test_patching_in_place_through_memoryview_at_position() -> None:
    one = bytes(make_batch())
    buf = bytearray(one * 2)
    view = memoryview(buf)
    set_base_offset(view, len(one), 50)
    set_partition_leader_epoch(view, len(one), 2)
    set_log_append_time(view, len(one), 9_999)
    assert [h.base_offset for _, h in iter_batches(buf)] == [0, 50]
    assert parse_header(buf, 0) == parse_header(one)
    assert verify_crc(buf, len(one))
    second = parse_header(buf, len(one))
    assert second.timestamp_type is TimestampType.LOG_APPEND_TIME


@pytest.mark.parametrize("codec", list(Compression))
def test_set_log_append_time(codec: Compression) -> None:
    buf = make_batch(compression=codec, is_transactional=True)
    before = parse_header(buf)
    set_log_append_time(buf, 0, 1_700_000_000_000)
    after = parse_header(buf)
    assert after.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert after.max_timestamp == 1_700_000_000_000
    assert after.base_timestamp == before.base_timestamp  # as Kafka: only maxTimestamp moves
    assert after.compression is codec
    assert after.is_transactional
    assert after.crc != before.crc
    assert verify_crc(buf)
    records = decode_batch(buf)[1]
    assert [r.timestamp for r in records] == [1_700_000_000_000] * 3
    # Setting it again with the same value changes nothing.
    snapshot = bytes(buf)
    set_log_append_time(buf, 0, 1_700_000_000_000)
    assert bytes(buf) == snapshot


def test_set_log_append_time_rejects_truncated_batch() -> None:
    buf = make_batch()[:-1]
    with pytest.raises(CorruptBatchError):
        set_log_append_time(buf, 0, 5)


# --- validate_produce_records -------------------------------------------------------


@pytest.mark.parametrize("codec", list(Compression))
def test_validate_accepts_good_batches(codec: Compression) -> None:
    buf = bytes(make_batch(compression=codec, producer_id=1, producer_epoch=0, base_sequence=0))
    h = validate_produce_records(buf)
    assert h == parse_header(buf)
    assert validate_produce_records(memoryview(buf)) == h
    assert validate_produce_records(bytearray(buf)) == h


def test_validate_accepts_kafka_python_batch() -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=7,
        producer_epoch=0,
        base_sequence=10,
        batch_size=1 << 20,
    )
    for i in range(10):
        builder.append(i, timestamp=1_000 + i, key=None, value=b"x%d" % i, headers=[])
    h = validate_produce_records(bytes(builder.build()))
    assert (h.record_count, h.base_sequence, h.last_sequence) == (10, 10, 19)


def test_validate_rejects_two_batches() -> None:
    one = bytes(make_batch())
    with pytest.raises(InvalidRecordError, match="exactly one"):
        validate_produce_records(one + one)


@pytest.mark.parametrize(
    "garbage", [b"\x00", b"\x00" * 11, b"\xff" * 12, b"\x00" * 40, b"junk" * 30]
)
def test_validate_rejects_trailing_garbage(garbage: bytes) -> None:
    with pytest.raises(CorruptBatchError, match="trailing"):
        validate_produce_records(bytes(make_batch()) + garbage)


@pytest.mark.parametrize("keep", [1, 11, 16, 17, 40, 60, 61, -1])
def test_validate_rejects_truncated_batch(keep: int) -> None:
    with pytest.raises(CorruptBatchError):
        validate_produce_records(bytes(make_batch())[:keep])


def test_validate_rejects_empty() -> None:
    with pytest.raises(InvalidRecordError):
        validate_produce_records(b"")


def test_validate_rejects_bad_crc() -> None:
    buf = make_batch()
    buf[-1] ^= 0xFF
    with pytest.raises(CorruptBatchError, match="CRC"):
        validate_produce_records(buf)
    buf = make_batch()
    patch(buf, 17, ">I", 0, fix_crc=False)
    with pytest.raises(CorruptBatchError, match="CRC"):
        validate_produce_records(buf)


def test_validate_rejects_length_below_minimum() -> None:
    buf = make_batch()
    patch(buf, 8, ">i", 20, fix_crc=False)
    with pytest.raises(CorruptBatchError):
        validate_produce_records(buf)


def test_validate_rejects_magic_1() -> None:
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    builder.append(0, timestamp=1_000, key=b"k", value=b"v")
    legacy = bytes(builder.build())
    assert legacy[16] == 1
    with pytest.raises(InvalidRecordError, match="magic"):
        validate_produce_records(legacy)


def test_validate_rejects_magic_0_and_3() -> None:
    for magic in (0, 3):
        buf = make_batch()
        buf[16] = magic
        with pytest.raises(InvalidRecordError, match="magic"):
            validate_produce_records(buf)


@pytest.mark.parametrize(("count", "delta"), [(2, 2), (4, 2), (0, -1), (0, 0), (-1, -2)])
def test_validate_rejects_count_mismatch(count: int, delta: int) -> None:
    buf = make_batch()
    patch(buf, 57, ">i", count, fix_crc=False)
    patch(buf, 23, ">i", delta)
    assert verify_crc(buf)
    with pytest.raises(InvalidRecordError, match="count"):
        validate_produce_records(buf)


def test_validate_rejects_control_batch() -> None:
    buf = make_batch()
    patch(buf, 21, ">h", 0x20)
    with pytest.raises(InvalidRecordError, match="control"):
        validate_produce_records(buf)


def test_validate_rejects_producer_id_with_negative_sequence() -> None:
    buf = make_batch(producer_id=5, producer_epoch=0, base_sequence=-1)
    with pytest.raises(InvalidRecordError, match="sequence"):
        validate_produce_records(buf)
    # No producer id and no sequence is fine (non-idempotent producer).
    validate_produce_records(make_batch())


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_validate_rejects_unknown_codec(codec: int) -> None:
    buf = make_batch()
    patch(buf, 21, ">h", codec)
    with pytest.raises(InvalidRecordError, match="codec"):
        validate_produce_records(buf)


def test_validate_checks_crc_before_semantics() -> None:
    # A corrupted control bit must surface as corruption, not as an invalid record.
    buf = make_batch()
    patch(buf, 21, ">h", 0x20, fix_crc=False)
    with pytest.raises(CorruptBatchError):
        validate_produce_records(buf)
