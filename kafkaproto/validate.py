"""Full validation of a produced record batch: header, CRC, payload and every record's framing.

``validate_produce_records`` (kafkaproto.batch) checks what the 61 header bytes and the
CRC can tell; a CRC-valid batch may still hold records no consumer can read. This module
adds what Kafka's LogValidator learns by iterating the records: the (capped) payload
decompresses, every record's length, offset delta and key/value/header lengths agree with
the batch header, and the records fill the payload exactly.

The per-record walk runs in a small C extension (``kafkaproto._recordwalk``, built by
setup.py, optional) so the cost stays per batch rather than per record in Python; the
pure-Python walk below is the fallback and the reference the tests hold it to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from kafkaproto.batch import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    MAX_TIMESTAMP_OFFSET,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    Buffer,
    Compression,
    CorruptBatchError,
    InvalidRecordError,
    RecordErrorsError,
    compute_crc,
    validate_produce_records,
)
from kafkaproto.compression import decompress_capped_view
from kafkaproto.varint import VarintError, decode_varint, decode_varlong

__all__ = [
    "WALK_IMPLEMENTATION",
    "ValidatedBatch",
    "check_batch_records",
    "validate_batch",
]

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_CRC_OFFSET = 17

# Walk result codes, shared with _recordwalk.c.
OK = 0
END_OF_RECORDS = 1
BAD_VARINT = 2
RECORD_LENGTH = 3
OFFSET_DELTA = 4
KEY_LENGTH = 5
VALUE_LENGTH = 6
HEADER_COUNT = 7
HEADER_KEY_NULL = 8
HEADER_KEY_LENGTH = 9
HEADER_VALUE_LENGTH = 10
HEADER_KEY_UTF8 = 11
RECORD_SIZE_MISMATCH = 12
TRAILING_BYTES = 13
NULL_KEY = 14

_FIELDS = (
    "length",
    "timestampDelta",
    "offsetDelta",
    "keyLength",
    "valueLength",
    "headerCount",
    "header keyLength",
    "header valueLength",
)
_MIN_RECORD_SIZE = 6  # attributes and five one-byte varints

# (code, record index, byte position in the payload, detail, max timestamp delta)
WalkResult = tuple[int, int, int, int, int]


class ValidatedBatch(NamedTuple):
    """What validation learnt: the header, and facts only the records could tell."""

    header: BatchHeader
    #: Largest record timestamp (CreateTime), as Kafka recomputes it; equals
    #: header.max_timestamp unless the batch was rewritten or LogAppendTime is set.
    max_timestamp: int
    #: Bytes of the records once decompressed (the payload the walk covered).
    uncompressed_size: int


def _walk_python(data: Buffer, count: int, reject_null_keys: bool) -> WalkResult:
    """Reference walk: the same checks and result as _recordwalk.walk, one record at a time.

    A bad varint is reported at its first byte; every field is bounded by its record.
    """
    n = len(data)
    p = 0
    max_delta = _INT64_MIN
    for i in range(count):
        if p >= n:
            return (END_OF_RECORDS, i, p, 0, max_delta)
        try:
            length, q = decode_varint(data, p)
        except (VarintError, IndexError):
            return (BAD_VARINT, i, p, 0, max_delta)
        p = q
        if length < _MIN_RECORD_SIZE or length > n - p:
            return (RECORD_LENGTH, i, p, length, max_delta)
        record = bytes(data[p : p + length])
        base = p
        field = 1
        start = r = 1  # after the attributes byte, unused in magic 2
        try:
            timestamp_delta, r = decode_varlong(record, r)
            max_delta = max(max_delta, timestamp_delta)
            field, start = 2, r
            offset_delta, r = decode_varint(record, r)
            if offset_delta != i:
                return (OFFSET_DELTA, i, base + r, offset_delta, max_delta)
            field, start = 3, r
            size, r = decode_varint(record, r)
            if size == -1:
                if reject_null_keys:
                    return (NULL_KEY, i, base + start, size, max_delta)
            elif size < 0 or size > length - r:
                return (KEY_LENGTH, i, base + start, size, max_delta)
            else:
                r += size
            field, start = 4, r
            size, r = decode_varint(record, r)
            if size != -1:
                if size < 0 or size > length - r:
                    return (VALUE_LENGTH, i, base + start, size, max_delta)
                r += size
            field, start = 5, r
            header_count, r = decode_varint(record, r)
            if header_count < 0 or header_count > (length - r) // 2:
                return (HEADER_COUNT, i, base + start, header_count, max_delta)
            for _ in range(header_count):
                field, start = 6, r
                size, r = decode_varint(record, r)
                if size == -1:
                    return (HEADER_KEY_NULL, i, base + start, size, max_delta)
                if size < 0 or size > length - r:
                    return (HEADER_KEY_LENGTH, i, base + start, size, max_delta)
                try:
                    record[r : r + size].decode()
                except UnicodeDecodeError:
                    return (HEADER_KEY_UTF8, i, base + r, size, max_delta)
                r += size
                field, start = 7, r
                size, r = decode_varint(record, r)
                if size != -1:
                    if size < 0 or size > length - r:
                        return (HEADER_VALUE_LENGTH, i, base + start, size, max_delta)
                    r += size
        except (VarintError, IndexError):
            return (BAD_VARINT, i, base + start, field, max_delta)
        if r != length:
            return (RECORD_SIZE_MISMATCH, i, base + r, length, max_delta)
        p = base + length
    if p != n:
        return (TRAILING_BYTES, count, p, n - p, max_delta)
    return (OK, count, p, 0, max_delta)


_walk: Callable[[Buffer, int, bool], WalkResult]
WALK_IMPLEMENTATION: str
try:
    from kafkaproto._recordwalk import walk as _compiled_walk
except ImportError:  # built without a C compiler: same answers, slower
    _walk = _walk_python
    WALK_IMPLEMENTATION = "python"
else:
    _walk = _compiled_walk
    WALK_IMPLEMENTATION = "c"


def _raise_for(result: WalkResult, count: int) -> None:
    code, index, pos, detail, _ = result
    where = f"record {index} (payload byte {pos})"
    if code == END_OF_RECORDS:
        raise InvalidRecordError(
            f"batch declares {count} records but its payload ends after {index}"
        )
    if code == BAD_VARINT:
        raise CorruptBatchError(f"{where}: {_FIELDS[detail]} varint is truncated or malformed")
    if code == RECORD_LENGTH:
        raise CorruptBatchError(
            f"{where}: record length {detail} is below {_MIN_RECORD_SIZE} or runs past the payload"
        )
    if code == OFFSET_DELTA:
        raise InvalidRecordError(f"{where}: offset delta {detail}, expected {index}")
    if code == KEY_LENGTH:
        raise CorruptBatchError(f"{where}: key length {detail} is invalid or runs past the record")
    if code == VALUE_LENGTH:
        raise CorruptBatchError(
            f"{where}: value length {detail} is invalid or runs past the record"
        )
    if code == HEADER_COUNT:
        raise CorruptBatchError(f"{where}: header count {detail} is invalid")
    if code == HEADER_KEY_NULL:
        raise InvalidRecordError(f"{where}: a record header has a null key")
    if code == HEADER_KEY_LENGTH:
        raise CorruptBatchError(
            f"{where}: header key length {detail} is invalid or runs past the record"
        )
    if code == HEADER_VALUE_LENGTH:
        raise CorruptBatchError(
            f"{where}: header value length {detail} is invalid or runs past the record"
        )
    if code == HEADER_KEY_UTF8:
        raise InvalidRecordError(f"{where}: a record header key is not UTF-8")
    if code == RECORD_SIZE_MISMATCH:
        raise CorruptBatchError(f"{where}: the record's fields do not fill its length {detail}")
    if code == TRAILING_BYTES:
        raise CorruptBatchError(f"{detail} bytes remain after the batch's {count} records")
    raise AssertionError(f"unknown walk result {code}")


NULL_KEY_MESSAGE = "compacted topic cannot accept a record without a key"
_ERRORS_SHOWN = 3


def _null_key_records(data: Buffer, count: int) -> list[tuple[int, int]]:
    """(index, payload byte of the key length) of every record without a key, in records
    the walk found well-formed. Per-record Python, but only for a batch being refused."""
    found = []
    p = 0
    for i in range(count):
        length, base = decode_varint(data, p)
        _, r = decode_varlong(data, base + 1)  # after the attributes: timestampDelta
        _, r = decode_varint(data, r)  # offsetDelta
        key_length, _ = decode_varint(data, r)
        if key_length == -1:
            found.append((i, r))
        p = base + length
    return found


def _null_keys_error(data: Buffer, count: int) -> RecordErrorsError:
    found = _null_key_records(data, count)
    shown = "; ".join(f"record {i} (payload byte {pos}): {NULL_KEY_MESSAGE}"
                      for i, pos in found[:_ERRORS_SHOWN])
    return RecordErrorsError(
        f"{len(found)} of the batch's {count} records rejected (the first {_ERRORS_SHOWN} at "
        f"most shown): {shown}",
        [(i, NULL_KEY_MESSAGE) for i, _ in found])


def check_batch_records(
    buf: Buffer,
    header: BatchHeader,
    pos: int = 0,
    *,
    max_uncompressed_bytes: int,
    reject_null_keys: bool = False,
) -> ValidatedBatch:
    """Decompress (capped) and walk the records of the whole batch at ``pos``.

    For readers of stored batches (cleaner, timestamp lookups, ``logserver check``, the
    bridge): the header must already be parsed and the batch must lie within ``buf``.
    Raises CorruptBatchError (DecompressionBombError past the cap) or InvalidRecordError
    (RecordErrorsError naming the records without a key, with ``reject_null_keys``).
    """
    view = memoryview(buf)[pos + BATCH_HEADER_SIZE : pos + header.size]
    codec = header.attributes & COMPRESSION_MASK
    if codec > Compression.ZSTD:
        raise InvalidRecordError(f"unknown compression codec {codec}")
    # The decompressed records are only walked: zstd output may live in a buffer this
    # thread reuses (kafkaproto.compression.decompress_capped_view).
    data: Buffer = view if codec == 0 else decompress_capped_view(
        Compression(codec), view, max_uncompressed_bytes
    )
    count = header.record_count
    if count < 0:
        raise InvalidRecordError(f"batch has negative record count {count}")
    result = _walk(data, count, reject_null_keys)
    if result[0] == NULL_KEY:
        # As Kafka's LogValidator: a malformed record anywhere refuses the batch outright;
        # if every record is well-formed, name each record without a key (KIP-467).
        result = _walk(data, count, False)
        if result[0] == OK:
            raise _null_keys_error(data, count)
    if result[0] != OK:
        _raise_for(result, count)
    max_delta = result[4]
    if header.attributes & TIMESTAMP_TYPE_MASK or count == 0:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = header.base_timestamp + max_delta
        if not _INT64_MIN <= max_timestamp <= _INT64_MAX:
            raise InvalidRecordError(
                f"record timestamp {max_timestamp} (base {header.base_timestamp} + delta "
                f"{max_delta}) is outside int64"
            )
    return ValidatedBatch(header, max_timestamp, len(data))


def validate_batch(
    buf: Buffer,
    *,
    max_uncompressed_bytes: int,
    reject_null_keys: bool = False,
    fix_max_timestamp: bool = True,
) -> ValidatedBatch:
    """Validate one partition's Produce records completely before they are appended.

    ``validate_produce_records``'s header and CRC checks, then every record (see
    check_batch_records). ``max_uncompressed_bytes`` bounds the decompressed payload
    (``max.message.bytes``); ``reject_null_keys`` for compacted topics. A CreateTime
    batch whose maxTimestamp disagrees with its records is corrected in ``buf`` (and the
    CRC recomputed), as Kafka's LogValidator does, when ``fix_max_timestamp`` is set and
    ``buf`` is writable; otherwise it is refused with InvalidRecordError.
    """
    header = validate_produce_records(buf)
    checked = check_batch_records(
        buf, header, max_uncompressed_bytes=max_uncompressed_bytes,
        reject_null_keys=reject_null_keys,
    )
    if checked.max_timestamp == header.max_timestamp:
        return checked
    view = memoryview(buf)
    if not fix_max_timestamp or view.readonly:
        raise InvalidRecordError(
            f"batch maxTimestamp {header.max_timestamp} disagrees with its records' largest "
            f"timestamp {checked.max_timestamp}"
        )
    view[MAX_TIMESTAMP_OFFSET : MAX_TIMESTAMP_OFFSET + 8] = checked.max_timestamp.to_bytes(
        8, "big", signed=True
    )
    crc = compute_crc(view, 0, header.size)
    view[_CRC_OFFSET : _CRC_OFFSET + 4] = crc.to_bytes(4, "big")
    fixed = header._replace(max_timestamp=checked.max_timestamp, crc=crc)
    return ValidatedBatch(fixed, checked.max_timestamp, checked.uncompressed_size)
