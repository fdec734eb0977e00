"""Record batch v2 (magic 2) headers: parse, patch and validate without decoding records.

This is the broker's hot path: every function here does constant work per batch and
never looks at individual records, so produce/fetch cost stays per request, not per
record. Layout (byte offsets from the start of the batch)::

    0 baseOffset i64 | 8 length i32 | 12 partitionLeaderEpoch i32 | 16 magic i8
    17 crc u32 | 21 attributes i16 | 23 lastOffsetDelta i32 | 27 baseTimestamp i64
    35 maxTimestamp i64 | 43 producerId i64 | 51 producerEpoch i16
    53 baseSequence i32 | 57 recordCount i32 | 61 records

The CRC-32C covers byte 21 to the end of the batch, so base offset, length and leader
epoch can be patched in place without recomputing it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from enum import IntEnum
from typing import NamedTuple

from kafkaproto.crc import crc32c

__all__ = [
    "BATCH_HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC_V2",
    "MIN_LENGTH",
    "BatchHeader",
    "Buffer",
    "Compression",
    "CorruptBatchError",
    "InvalidRecordError",
    "RecordErrorsError",
    "TimestampType",
    "compute_crc",
    "iter_batches",
    "parse_header",
    "peek_offset_and_size",
    "set_base_offset",
    "set_log_append_time",
    "set_partition_leader_epoch",
    "validate_produce_records",
    "verify_crc",
]

Buffer = bytes | bytearray | memoryview
WritableBuffer = bytearray | memoryview

LOG_OVERHEAD = 12  # baseOffset i64 + length i32
BATCH_HEADER_SIZE = 61
MIN_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD  # 49: a batch with no record bytes at all
MAGIC_V2 = 2

# Field offsets, relative to the start of the batch.
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORD_COUNT_OFFSET = 57
RECORDS_OFFSET = 61

# Attribute bits.
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
_INT32_MAX = 2**31 - 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")
assert _HEADER.size == BATCH_HEADER_SIZE


class Compression(IntEnum):
    """Codec id stored in attribute bits 0-2."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    """Attribute bit 3: who chose the batch's timestamps."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class CorruptBatchError(ValueError):
    """Bytes are not a well-formed batch (torn, bad CRC, bad sizes): CORRUPT_MESSAGE."""


class InvalidRecordError(ValueError):
    """A well-formed batch a broker must still refuse (semantics): INVALID_RECORD."""


class RecordErrorsError(InvalidRecordError):
    """INVALID_RECORD because of particular records (KIP-467): the whole batch is refused,
    and ``record_errors`` ((index in the batch, message), ...) tell the producer which
    records to fail, so it can fail only those and keep the others' error generic."""

    def __init__(self, message: str, record_errors: Sequence[tuple[int, str]]) -> None:
        super().__init__(message)
        self.record_errors = tuple(record_errors)


class BatchHeader(NamedTuple):
    """The 61 fixed header bytes of one batch, decoded; records are not touched."""

    base_offset: int
    length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies in a log or a records field."""
        return self.length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        """Raises ValueError for codec ids 5-7, which no Kafka version defines."""
        return Compression(self.attributes & COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return (
            TimestampType.LOG_APPEND_TIME
            if self.attributes & TIMESTAMP_TYPE_MASK
            else TimestampType.CREATE_TIME
        )

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; wraps past 2**31-1 to 0 as Kafka's does."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & _INT32_MAX


def parse_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Decode the fixed header at ``pos``; the batch body may be absent (not checked)."""
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptBatchError(
            f"batch header at {pos} needs {BATCH_HEADER_SIZE} bytes, "
            f"only {max(len(buf) - pos, 0)} available"
        )
    header = BatchHeader._make(_HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC_V2:
        raise CorruptBatchError(f"batch at {pos} has magic {header.magic}, expected {MAGIC_V2}")
    if header.length < MIN_LENGTH:
        raise CorruptBatchError(
            f"batch at {pos} has length {header.length}, below the minimum {MIN_LENGTH}"
        )
    return header


def peek_offset_and_size(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """(base_offset, size) from the first 12 bytes: enough to skip or index a batch."""
    if len(buf) - pos < LOG_OVERHEAD:
        raise CorruptBatchError(
            f"batch at {pos} needs {LOG_OVERHEAD} bytes for offset and length, "
            f"only {max(len(buf) - pos, 0)} available"
        )
    base_offset, length = _OFFSET_AND_LENGTH.unpack_from(buf, pos)
    return base_offset, length + LOG_OVERHEAD


def compute_crc(buf: Buffer, pos: int, header_or_size: BatchHeader | int) -> int:
    """CRC-32C over byte 21 .. end of the batch at ``pos`` (the value the crc field holds)."""
    size = header_or_size.size if isinstance(header_or_size, BatchHeader) else header_or_size
    end = pos + size
    if size < BATCH_HEADER_SIZE or end > len(buf):
        raise CorruptBatchError(f"batch at {pos} of size {size} does not fit in {len(buf)} bytes")
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    return crc32c(view[pos + ATTRIBUTES_OFFSET : end])


def verify_crc(buf: Buffer, pos: int = 0, header: BatchHeader | None = None) -> bool:
    """True if the stored CRC matches; False also for a batch cut short by ``buf``'s end."""
    if header is None:
        header = parse_header(buf, pos)
    if pos + header.size > len(buf):
        return False
    return compute_crc(buf, pos, header) == header.crc


def iter_batches(
    buf: Buffer, pos: int = 0, end: int | None = None
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) of each complete batch in ``buf[pos:end]``.

    Stops silently at a trailing partial batch (fetch responses and torn log tails may
    end with one); callers that need to know compare the last ``position + size`` with
    ``end``. A complete-looking batch with a bad magic or length raises CorruptBatchError.
    """
    if end is None:
        end = len(buf)
    elif end > len(buf):
        raise ValueError(f"end {end} is past the buffer's {len(buf)} bytes")
    unpack_from = _OFFSET_AND_LENGTH.unpack_from
    while end - pos >= LOG_OVERHEAD:
        length = unpack_from(buf, pos)[1]
        if length < MIN_LENGTH:
            raise CorruptBatchError(
                f"batch at {pos} has length {length}, below the minimum {MIN_LENGTH}"
            )
        size = length + LOG_OVERHEAD
        if pos + size > end:
            return
        header = parse_header(buf, pos)
        yield pos, header
        pos += size


def set_base_offset(buf: WritableBuffer, pos: int, base_offset: int) -> None:
    """Assign the batch its log offset on append; outside the CRC, so nothing else moves."""
    _I64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: WritableBuffer, pos: int, epoch: int) -> None:
    """Stamp the leader epoch on append; outside the CRC, so nothing else moves."""
    _I32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: WritableBuffer, pos: int, timestamp_ms: int) -> None:
    """Mark the batch LogAppendTime with ``timestamp_ms`` and recompute the CRC.

    Like Kafka's DefaultRecordBatch.setMaxTimestamp: only attribute bit 3 and
    maxTimestamp change (baseTimestamp and record deltas stay); consumers read every
    record's timestamp as maxTimestamp when the bit is set.
    """
    header = parse_header(buf, pos)
    if header.attributes & TIMESTAMP_TYPE_MASK and header.max_timestamp == timestamp_ms:
        return
    if pos + header.size > len(buf):
        raise CorruptBatchError(
            f"batch at {pos} of size {header.size} does not fit in {len(buf)} bytes"
        )
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, header.attributes | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    _U32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, header.size))


def validate_produce_records(buf: Buffer) -> BatchHeader:
    """Check one partition's records from a Produce request (v3+) before appending.

    Follows Kafka's ProduceRequest.validateRecords and LogValidator, without
    decompressing: torn or mis-sized bytes and CRC mismatches raise CorruptBatchError
    (CORRUPT_MESSAGE); a wrong magic, more than one batch, a count mismatch, a control
    batch, an unknown codec or a producer id without a sequence raise
    InvalidRecordError (INVALID_RECORD).
    """
    available = len(buf)
    if available == 0:
        raise InvalidRecordError("produce records must hold exactly one record batch, got none")
    if available <= MAGIC_OFFSET:
        raise CorruptBatchError(f"record batch truncated: only {available} bytes")
    magic = buf[MAGIC_OFFSET]
    if magic != MAGIC_V2:
        raise InvalidRecordError(
            f"produce records must use batch magic {MAGIC_V2}, got magic {magic}"
        )
    header = parse_header(buf, 0)
    size = header.size
    if size > available:
        raise CorruptBatchError(
            f"record batch truncated: length field says {size} bytes, only {available} present"
        )
    if size < available:
        extra = available - size
        if extra >= LOG_OVERHEAD:
            next_size = _OFFSET_AND_LENGTH.unpack_from(buf, size)[1] + LOG_OVERHEAD
            if BATCH_HEADER_SIZE <= next_size <= extra:
                raise InvalidRecordError(
                    "produce records must hold exactly one record batch per partition, got more"
                )
        raise CorruptBatchError(f"{extra} trailing bytes after the record batch")
    crc = compute_crc(buf, 0, size)
    if crc != header.crc:
        raise CorruptBatchError(
            f"record batch CRC mismatch: stored {header.crc:#010x}, computed {crc:#010x}"
        )
    if header.record_count <= 0 or header.record_count != header.last_offset_delta + 1:
        raise InvalidRecordError(
            f"record batch has record count {header.record_count} and last offset delta "
            f"{header.last_offset_delta}; expected count == delta + 1 > 0"
        )
    if header.attributes & CONTROL_MASK:
        raise InvalidRecordError("clients may not produce control batches")
    codec = header.attributes & COMPRESSION_MASK
    if codec > Compression.ZSTD:
        raise InvalidRecordError(f"unknown compression codec {codec}")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError(
            f"producer id {header.producer_id} needs a base sequence >= 0, "
            f"got {header.base_sequence}"
        )
    return header
