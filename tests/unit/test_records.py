"""kafkaproto.records and kafkaproto.varint, cross-checked against kafka-python 3.0.12."""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Sequence

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from kafka.record.util import decode_varint as kp_decode_varint
from kafka.record.util import encode_varint as kp_encode_varint

from kafkaproto.batch import (
    Compression,
    CorruptBatchError,
    TimestampType,
    iter_batches,
    parse_header,
    set_base_offset,
    set_log_append_time,
    validate_produce_records,
    verify_crc,
)
from kafkaproto.compression import compress
from kafkaproto.records import Record, RecordTuple, build_batch, decode_batch, iter_records
from kafkaproto.varint import (
    VarintError,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    varint_size,
    varlong_size,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)

# --- varints ------------------------------------------------------------------------

VECTORS = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-2, "03"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (-65, "8101"),
    (8191, "fe7f"),
    (8192, "808001"),
    (2**31 - 1, "feffffff0f"),
    (-(2**31), "ffffffff0f"),
]


@pytest.mark.parametrize(("value", "hexed"), VECTORS)
def test_varint_vectors(value: int, hexed: str) -> None:
    encoded = bytes.fromhex(hexed)
    assert encode_varint(value) == encoded
    assert encode_varlong(value) == encoded
    assert decode_varint(encoded) == (value, len(encoded))
    assert decode_varlong(encoded) == (value, len(encoded))
    assert varint_size(value) == len(encoded)


def test_varlong_extremes() -> None:
    assert encode_varlong(2**63 - 1) == bytes.fromhex("feffffffffffffffff01")
    assert encode_varlong(-(2**63)) == bytes.fromhex("ffffffffffffffffff01")
    assert decode_varlong(bytes.fromhex("ffffffffffffffffff01")) == (-(2**63), 10)
    assert varlong_size(-(2**63)) == 10


@given(INT32)
def test_varint_round_trip_and_kafka_python(value: int) -> None:
    encoded = encode_varint(value)
    assert len(encoded) == varint_size(value)
    assert decode_varint(b"\xaa" + encoded + b"\xbb", 1) == (value, 1 + len(encoded))
    out = bytearray()
    kp_encode_varint(value, out.append)
    assert bytes(out) == encoded
    assert kp_decode_varint(encoded, 0) == (value, len(encoded))


@given(INT64)
def test_varlong_round_trip_and_kafka_python(value: int) -> None:
    encoded = encode_varlong(value)
    assert len(encoded) == varlong_size(value)
    assert decode_varlong(memoryview(encoded)) == (value, len(encoded))
    out = bytearray()
    kp_encode_varint(value, out.append)
    assert bytes(out) == encoded


def test_varint_errors() -> None:
    with pytest.raises(VarintError, match="truncated"):
        decode_varint(b"\x80")
    with pytest.raises(VarintError, match="truncated"):
        decode_varint(b"")
    with pytest.raises(VarintError, match="longer"):
        decode_varint(b"\x80\x80\x80\x80\x80\x00")
    with pytest.raises(VarintError, match="int32"):
        decode_varint(bytes.fromhex("808080807f"))
    with pytest.raises(VarintError, match="longer"):
        decode_varlong(b"\x80" * 10 + b"\x00")
    with pytest.raises(VarintError, match="int64"):
        decode_varlong(b"\xff" * 9 + b"\x7f")
    with pytest.raises(OverflowError):
        encode_varint(2**31)
    with pytest.raises(OverflowError):
        encode_varlong(-(2**63) - 1)
    assert issubclass(VarintError, ValueError)


# --- build and decode ---------------------------------------------------------------

HEADERS = st.lists(st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=20)), max_size=3)
RECORD = st.tuples(
    st.none() | st.binary(max_size=50),
    st.none() | st.binary(max_size=300),
    HEADERS,
    st.integers(0, 2**42),
)
RECORDS = st.lists(RECORD, min_size=1, max_size=40)


def as_tuples(records: Sequence[Record]) -> list[tuple[object, ...]]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]


def expected(records: Sequence[RecordTuple], base_offset: int = 0) -> list[tuple[object, ...]]:
    return [
        (base_offset + i, ts, key, value, list(headers))
        for i, (key, value, headers, ts) in enumerate(records)
    ]


SIMPLE: list[RecordTuple] = [
    (b"k", b"value", [("h1", b"a"), ("h2", None)], 1_000),
    (None, None, [], 995),
    (b"", b"", [("", b"")], 2_000),
]


@pytest.mark.parametrize("codec", list(Compression))
def test_build_decode_round_trip(codec: Compression) -> None:
    buf = build_batch(
        SIMPLE,
        base_offset=40,
        compression=codec,
        producer_id=9,
        producer_epoch=2,
        base_sequence=100,
        partition_leader_epoch=4,
    )
    header, records = decode_batch(buf)
    assert header == parse_header(buf)
    assert header.size == len(buf)
    assert header.compression is codec
    assert (header.base_timestamp, header.max_timestamp) == (1_000, 2_000)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (9, 2, 100)
    assert header.partition_leader_epoch == 4
    assert header.record_count == 3
    assert as_tuples(records) == expected(SIMPLE, 40)
    assert all(isinstance(r, Record) for r in records)
    assert validate_produce_records(buf) == header


def test_build_defaults_match_a_plain_producer() -> None:
    h = parse_header(build_batch(SIMPLE))
    assert (h.base_offset, h.partition_leader_epoch) == (0, -1)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (-1, -1, -1)
    assert h.attributes == 0


def test_build_transactional_and_log_append_time() -> None:
    buf = build_batch(
        SIMPLE,
        producer_id=1,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
    )
    header, records = decode_batch(buf)
    assert header.is_transactional
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in records] == [2_000] * 3


def test_build_rejects_empty() -> None:
    with pytest.raises(ValueError):
        build_batch([])


def test_decode_at_position_from_memoryview() -> None:
    one = build_batch(SIMPLE)
    buf = memoryview(b"junk" + one + b"more")
    header, records = decode_batch(buf, 4)
    assert header.size == len(one)
    assert as_tuples(records) == expected(SIMPLE)
    assert all(type(r.key) is bytes for r in records if r.key is not None)


def test_decode_uses_log_append_time_after_patch() -> None:
    buf = bytearray(build_batch(SIMPLE, compression=Compression.LZ4))
    set_base_offset(buf, 0, 500)
    set_log_append_time(buf, 0, 123_456)
    _, records = decode_batch(buf)
    assert [(r.offset, r.timestamp) for r in records] == [
        (500, 123_456),
        (501, 123_456),
        (502, 123_456),
    ]


def test_iter_records_over_many_batches_skips_control_and_partial() -> None:
    a = build_batch(SIMPLE[:2], base_offset=0)
    control = bytearray(
        build_batch([(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", [], 5)], base_offset=2)
    )
    control[21:23] = struct.pack(">h", 0x20 | 0x10)
    control[17:21] = struct.pack(">I", crc32c(bytes(control[21:])))
    b = build_batch(SIMPLE, base_offset=3, compression=Compression.SNAPPY)
    buf = a + bytes(control) + b + b[:40]
    got = list(iter_records(buf))
    assert [r.offset for r in got] == [0, 1, 3, 4, 5]
    assert got[2].value == b"value"
    # decode_batch itself still decodes the control batch for callers that want markers.
    header, records = decode_batch(buf, len(a))
    assert header.is_control
    assert records[0].key == b"\x00\x00\x00\x00"
    assert list(iter_records(b"")) == []


def test_iter_records_checks_crc() -> None:
    buf = bytearray(build_batch(SIMPLE))
    buf[-1] ^= 1
    with pytest.raises(CorruptBatchError, match="CRC"):
        list(iter_records(bytes(buf)))
    assert len(list(iter_records(bytes(buf), verify_crc=False))) == 3


# --- corruption ---------------------------------------------------------------------

_HEADER = struct.Struct(">qiibIhiqqqhii")


def raw_batch(payload: bytes, count: int, attributes: int = 0) -> bytes:
    """A batch around an arbitrary records payload, with a correct CRC."""
    out = bytearray(
        _HEADER.pack(0, 49 + len(payload), -1, 2, 0, attributes, count - 1, 0, 0, -1, -1, -1, count)
    )
    out += payload
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def record_bytes(body: bytes) -> bytes:
    return encode_varint(len(body)) + body


GOOD_BODY = (
    b"\x00"
    + encode_varlong(0)
    + encode_varint(0)
    + encode_varint(1)
    + b"k"
    + encode_varint(1)
    + b"v"
    + encode_varint(0)
)


def test_raw_batch_helper_is_sound() -> None:
    _, records = decode_batch(raw_batch(record_bytes(GOOD_BODY), 1))
    assert as_tuples(records) == [(0, 0, b"k", b"v", [])]


@pytest.mark.parametrize(
    ("payload", "count"),
    [
        (record_bytes(GOOD_BODY), 2),  # fewer records than declared
        (record_bytes(GOOD_BODY) * 2, 1),  # bytes remain after the declared records
        (record_bytes(GOOD_BODY) + b"\x00", 1),  # one stray byte
        (encode_varint(len(GOOD_BODY) + 1) + GOOD_BODY + b"\x00", 1),  # record length too long
        (encode_varint(len(GOOD_BODY) - 1) + GOOD_BODY, 1),  # record length too short
        (encode_varint(-1) + GOOD_BODY, 1),  # negative record length
        (encode_varint(1000) + GOOD_BODY, 1),  # length past the end
        (record_bytes(GOOD_BODY.replace(b"\x02k", b"\x03k")), 1),  # key length -2
        (record_bytes(b"\x00\x00\x00\x01\x01" + encode_varint(-3)), 1),  # header count -3
        (
            record_bytes(b"\x00\x00\x00\x01\x01\x02" + encode_varint(-1) + b"\x01"),
            1,
        ),  # header key null
        (record_bytes(b"\x00\x00\x00\x01\x01\x02\x02\xff\x01"), 1),  # header key not UTF-8
        (record_bytes(b"\x00\x00\x00\x01\x01\x02\x02h" + encode_varint(-5)), 1),  # header value -5
        (
            record_bytes(b"\x00\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x00\x01\x01\x00"),
            1,
        ),  # varlong too long
        (record_bytes(b"\x00\x00\x01\x01" + encode_varint(2**20)), 1),  # value past record end
        (b"\x80", 1),  # truncated varint
        (b"", 1),  # no records at all
        (record_bytes(GOOD_BODY), -1),  # negative count
    ],
)
def test_decode_rejects_malformed_records(payload: bytes, count: int) -> None:
    with pytest.raises(CorruptBatchError):
        decode_batch(raw_batch(payload, count))


def test_decode_rejects_malformed_compressed_records() -> None:
    payload = compress(Compression.ZSTD, record_bytes(GOOD_BODY) + b"\x00")
    with pytest.raises(CorruptBatchError, match="remain"):
        decode_batch(raw_batch(payload, 1, attributes=4))
    with pytest.raises(CorruptBatchError):
        decode_batch(raw_batch(b"not zstd", 1, attributes=4))
    with pytest.raises(CorruptBatchError, match="codec"):
        decode_batch(raw_batch(record_bytes(GOOD_BODY), 1, attributes=6))


def test_decode_rejects_truncated_and_bad_crc() -> None:
    buf = build_batch(SIMPLE)
    with pytest.raises(CorruptBatchError, match="truncated"):
        decode_batch(buf[:-1])
    with pytest.raises(CorruptBatchError):
        decode_batch(buf[:50])
    bad = bytearray(buf)
    bad[-1] ^= 0x40
    with pytest.raises(CorruptBatchError, match="CRC"):
        decode_batch(bad)
    bad = bytearray(buf)
    bad[17] ^= 0x01  # the stored CRC itself
    with pytest.raises(CorruptBatchError, match="CRC"):
        decode_batch(bad)
    header, _ = decode_batch(bad, verify_crc=False)
    assert not verify_crc(bad, 0, header)


@settings(max_examples=150, deadline=None)
@given(data=st.binary(max_size=200))
def test_decode_of_random_payload_never_escapes_corrupt_error(data: bytes) -> None:
    """Garbage must yield records or CorruptBatchError, never IndexError & co."""
    for count in (1, 3):
        with contextlib.suppress(CorruptBatchError):
            decode_batch(raw_batch(data, count))


# --- cross-checks with kafka-python -------------------------------------------------


def kafka_python_build(
    records: Sequence[RecordTuple],
    codec: Compression,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for i, (key, value, headers, ts) in enumerate(records):
        assert builder.append(i, timestamp=ts, key=key, value=value, headers=list(headers))
    return bytes(builder.build())


def kafka_python_decode(buf: bytes) -> list[tuple[object, ...]]:
    out: list[tuple[object, ...]] = []
    memory = MemoryRecords(buf)
    while memory.has_next():
        batch = memory.next_batch()
        assert isinstance(batch, DefaultRecordBatch)
        assert batch.validate_crc()
        for r in batch:
            out.append((r.offset, r.timestamp, r.key, r.value, list(r.headers)))
    return out


@settings(max_examples=40, deadline=None)
@given(records=RECORDS, codec=st.sampled_from(list(Compression)))
def test_kafka_python_decodes_our_batches(records: list[RecordTuple], codec: Compression) -> None:
    buf = build_batch(records, compression=codec, base_offset=10)
    assert kafka_python_decode(buf) == expected(records, 10)
    batch = DefaultRecordBatch(buf)
    assert batch.compression_type == codec
    assert (batch.first_timestamp, batch.max_timestamp) == (
        records[0][3],
        max(r[3] for r in records),
    )
    assert batch.last_offset_delta == len(records) - 1


@settings(max_examples=40, deadline=None)
@given(records=RECORDS, codec=st.sampled_from(list(Compression)))
def test_we_decode_kafka_python_batches(records: list[RecordTuple], codec: Compression) -> None:
    buf = kafka_python_build(records, codec, producer_id=3, producer_epoch=1, base_sequence=5)
    assert verify_crc(buf)
    header = validate_produce_records(buf)
    assert header.record_count == len(records)
    assert (header.producer_id, header.base_sequence) == (3, 5)
    assert header.last_sequence == 5 + len(records) - 1
    decoded_header, decoded = decode_batch(buf)
    assert decoded_header == header
    assert as_tuples(decoded) == expected(records)
    assert as_tuples(list(iter_records(buf))) == expected(records)


@pytest.mark.parametrize("codec", list(Compression))
def test_kafka_python_batches_of_each_codec_stay_compressed(codec: Compression) -> None:
    """Compressible data, so kafka-python really uses the codec (it falls back otherwise)."""
    records: list[RecordTuple] = [
        (
            b"device-%d" % (i % 7),
            b'{"temp": %d, "unit": "C"}' % i * 3,
            [("ct", b"json")],
            1_700_000_000_000 + i,
        )
        for i in range(2_000)
    ]
    buf = kafka_python_build(records, codec)
    header = validate_produce_records(buf)
    assert header.compression is codec
    assert as_tuples(decode_batch(buf)[1]) == expected(records)
    ours = build_batch(records, compression=codec)
    assert parse_header(ours).compression is codec
    assert kafka_python_decode(ours) == expected(records)


def test_kafka_python_reads_a_log_of_patched_batches() -> None:
    """Broker-style append (offsets, epoch, LogAppendTime) then a kafka-python fetch parse."""
    log = bytearray()
    next_offset = 0
    for codec in Compression:
        batch = bytearray(kafka_python_build(SIMPLE, codec))
        validate_produce_records(batch)
        set_base_offset(batch, 0, next_offset)
        set_log_append_time(batch, 0, 77_000 + next_offset)
        next_offset = parse_header(batch).next_offset
        log += batch
    assert [h.base_offset for _, h in iter_batches(log)] == [0, 3, 6, 9, 12]
    theirs = kafka_python_decode(bytes(log))
    ours = as_tuples(list(iter_records(log)))
    assert theirs == ours
    assert [t[0] for t in ours] == list(range(15))
    assert [t[1] for t in ours] == [77_000 + 3 * (i // 3) for i in range(15)]
