"""Full decode and encode of the records inside v2 record batches.

The broker never needs this (it stores and serves batches opaquely through
``kafkaproto.batch``); consumers of record contents do: the MQTT bridge, tests and
benchmarks. Decoding is strict in the way Kafka's DefaultRecord is (sizes must add up,
varints must be well formed, no bytes may remain), so garbage surfaces as
CorruptBatchError instead of as wrong records.

Record layout (after the 61-byte batch header, possibly compressed as one blob)::

    length varint | attributes i8 | timestampDelta varlong | offsetDelta varint
    keyLength varint | key | valueLength varint | value
    headerCount varint | [keyLength varint | key utf-8 | valueLength varint | value]*
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from kafkaproto.batch import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    MAGIC_V2,
    MIN_LENGTH,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    Buffer,
    Compression,
    CorruptBatchError,
    TimestampType,
    compute_crc,
    iter_batches,
    parse_header,
)
from kafkaproto.compression import compress, decompress, decompress_capped
from kafkaproto.crc import crc32c
from kafkaproto.varint import (
    VarintError,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
)

__all__ = ["Header", "Record", "RecordTuple", "build_batch", "decode_batch", "iter_records"]

Header = tuple[str, bytes | None]
RecordTuple = tuple[bytes | None, bytes | None, Sequence[Header], int]  # key, value, headers, ts

_HEADER = struct.Struct(">qiibIhiqqqhii")
_U32 = struct.Struct(">I")
_NULL = encode_varint(-1)
#: encode_varint(n) for 0 <= n < 4096 (zig-zag 2n): lengths, deltas, counts of records.
_SMALL_VARINT: tuple[bytes, ...] = tuple(encode_varint(n) for n in range(4096))

_compiled_encode: Callable[[Sequence[RecordTuple], int], tuple[bytes, int]] | None
try:  # built by setup.py when a C compiler is there (optional=True)
    from kafkaproto._recordbuild import encode as _compiled_encode
except ImportError:  # pragma: no cover - depends on the install
    _compiled_encode = None
_INT32_MAX = 2**31 - 1


@dataclass(slots=True)
class Record:
    """One decoded record with its absolute offset and effective timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)


def decode_batch(
    buf: Buffer,
    pos: int = 0,
    *,
    verify_crc: bool = True,
    max_uncompressed_bytes: int | None = None,
) -> tuple[BatchHeader, list[Record]]:
    """Decode the batch at ``pos`` and all its records (control batches included).

    Verifies the CRC unless told not to (a Java consumer does by default), decompresses,
    and raises CorruptBatchError for any inconsistency. With LogAppendTime every
    record's timestamp is the batch's max_timestamp, as Kafka reports it. Bytes from the
    network or a log should pass ``max_uncompressed_bytes``: decompression then streams
    and raises DecompressionBombError past it instead of inflating a bomb whole.
    """
    header = parse_header(buf, pos)
    end = pos + header.size
    if end > len(buf):
        raise CorruptBatchError(
            f"batch at {pos} is truncated: {header.size} bytes declared, {len(buf) - pos} present"
        )
    if verify_crc:
        crc = compute_crc(buf, pos, header.size)
        if crc != header.crc:
            raise CorruptBatchError(
                f"batch at {pos} CRC mismatch: stored {header.crc:#010x}, computed {crc:#010x}"
            )
    return header, _decode_records(buf, pos, header, max_uncompressed_bytes)


def iter_records(
    buf: Buffer, *, verify_crc: bool = True, max_uncompressed_bytes: int | None = None
) -> Iterator[Record]:
    """Every record of every complete batch in ``buf`` (e.g. a fetch response's records).

    Control batches (transaction markers) are skipped, as consumers skip them; a
    trailing partial batch is ignored, as a fetch response may end with one.
    ``max_uncompressed_bytes`` caps each batch's decompression as in decode_batch.
    """
    for pos, header in iter_batches(buf):
        if header.attributes & CONTROL_MASK:
            continue
        if verify_crc:
            crc = compute_crc(buf, pos, header.size)
            if crc != header.crc:
                raise CorruptBatchError(
                    f"batch at {pos} CRC mismatch: stored {header.crc:#010x}, computed {crc:#010x}"
                )
        yield from _decode_records(buf, pos, header, max_uncompressed_bytes)


def _decode_records(
    buf: Buffer, pos: int, header: BatchHeader, max_uncompressed_bytes: int | None = None
) -> list[Record]:
    """Decode the records of a batch already known to lie wholly within ``buf``."""
    body = memoryview(buf)[pos + BATCH_HEADER_SIZE : pos + header.size]
    codec = header.attributes & COMPRESSION_MASK
    if codec:
        if codec > Compression.ZSTD:
            raise CorruptBatchError(f"batch at {pos} uses unknown compression codec {codec}")
        if max_uncompressed_bytes is None:
            data = decompress(Compression(codec), body)
        else:
            data = decompress_capped(Compression(codec), body, max_uncompressed_bytes)
    else:
        data = bytes(body)
    count = header.record_count
    if count < 0:
        raise CorruptBatchError(f"batch at {pos} has negative record count {count}")
    log_append_time = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_MASK else None
    try:
        records, used = _parse_records(
            data, count, header.base_offset, header.base_timestamp, log_append_time
        )
    except (IndexError, VarintError, UnicodeDecodeError) as exc:
        raise CorruptBatchError(f"batch at {pos} has malformed records: {exc}") from exc
    if used != len(data):
        raise CorruptBatchError(
            f"batch at {pos} declares {count} records but {len(data) - used} bytes remain after them"
        )
    return records


def _parse_records(
    data: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
) -> tuple[list[Record], int]:
    """Walk ``count`` records; one-byte varints (the common case) are decoded inline."""
    records: list[Record] = []
    append = records.append
    n = len(data)
    p = 0
    for _ in range(count):
        b = data[p]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            length, p = decode_varint(data, p)
        record_end = p + length
        if length < 6 or record_end > n:
            raise CorruptBatchError(f"record at byte {p} has length {length}, {n - p} bytes remain")
        p += 1  # attributes: unused in magic 2
        b = data[p]
        if b < 0x80:
            timestamp_delta = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            timestamp_delta, p = decode_varlong(data, p)
        b = data[p]
        if b < 0x80:
            offset_delta = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            offset_delta, p = decode_varint(data, p)
        b = data[p]
        if b < 0x80:
            size = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            size, p = decode_varint(data, p)
        if size >= 0:
            key: bytes | None = data[p : p + size]
            p += size
        elif size == -1:
            key = None
        else:
            raise CorruptBatchError(f"record key length {size} is negative")
        b = data[p]
        if b < 0x80:
            size = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            size, p = decode_varint(data, p)
        if size >= 0:
            value: bytes | None = data[p : p + size]
            p += size
        elif size == -1:
            value = None
        else:
            raise CorruptBatchError(f"record value length {size} is negative")
        b = data[p]
        if b < 0x80:
            header_count = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            header_count, p = decode_varint(data, p)
        headers: list[Header] = []
        if header_count:
            if header_count < 0:
                raise CorruptBatchError(f"record header count {header_count} is negative")
            for _ in range(header_count):
                size, p = decode_varint(data, p)
                if size < 0:
                    raise CorruptBatchError(f"record header key length {size} is negative")
                header_key = data[p : p + size].decode()
                p += size
                size, p = decode_varint(data, p)
                if size >= 0:
                    header_value: bytes | None = data[p : p + size]
                    p += size
                elif size == -1:
                    header_value = None
                else:
                    raise CorruptBatchError(f"record header value length {size} is negative")
                headers.append((header_key, header_value))
                if p > record_end:
                    break
        if p != record_end:
            raise CorruptBatchError(
                f"record ending at byte {record_end} declared {length} bytes but used "
                f"{length + p - record_end}"
            )
        append(
            Record(
                base_offset + offset_delta,
                base_timestamp + timestamp_delta if log_append_time is None else log_append_time,
                key,
                value,
                headers,
            )
        )
    return records, p


def _encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header],
) -> bytes:
    """One record with its length prefix."""
    parts = [b"\x00", encode_varlong(timestamp_delta), encode_varint(offset_delta)]
    if key is None:
        parts.append(_NULL)
    else:
        parts.append(encode_varint(len(key)))
        parts.append(key)
    if value is None:
        parts.append(_NULL)
    else:
        parts.append(encode_varint(len(value)))
        parts.append(value)
    parts.append(encode_varint(len(headers)))
    for header_key, header_value in headers:
        encoded_key = header_key.encode()
        parts.append(encode_varint(len(encoded_key)))
        parts.append(encoded_key)
        if header_value is None:
            parts.append(_NULL)
        else:
            parts.append(encode_varint(len(header_value)))
            parts.append(header_value)
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def build_batch(
    records: Sequence[RecordTuple],
    *,
    base_offset: int = 0,
    compression: Compression = Compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
) -> bytes:
    """Encode ``(key, value, headers, timestamp_ms)`` tuples as one v2 batch, as a producer would.

    The first record's timestamp is the base timestamp (deltas may be negative, as in
    Java's MemoryRecordsBuilder); max_timestamp is the largest timestamp.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    if len(records) - 1 > _INT32_MAX:
        raise ValueError(f"too many records for one batch: {len(records)}")
    base_timestamp = records[0][3]
    payload, max_timestamp = _encode_records(records, base_timestamp)
    return _finish_batch(payload, len(records), base_timestamp, max_timestamp, base_offset,
                         compression, producer_id, producer_epoch, base_sequence,
                         partition_leader_epoch, is_transactional, timestamp_type)


def _encode_records_py(records: Sequence[RecordTuple], base_timestamp: int) -> tuple[bytes, int]:
    """The records section of a batch and its largest timestamp (reference encoding)."""
    max_timestamp = base_timestamp
    encoded: list[bytes] = []
    append = encoded.append
    small = _SMALL_VARINT
    for offset_delta, (key, value, headers, timestamp) in enumerate(records):
        if timestamp > max_timestamp:
            max_timestamp = timestamp
        delta = timestamp - base_timestamp
        # Hot path of the bridge's producer (one call per MQTT message): no headers,
        # small deltas and lengths, each varint one table lookup instead of a call.
        if (
            not headers
            and 0 <= delta < 4096
            and offset_delta < 4096
            and value is not None
            and len(value) < 4096
            and (key is None or len(key) < 4096)
        ):
            body = b"".join((
                b"\x00", small[delta], small[offset_delta],
                _NULL if key is None else small[len(key)], b"" if key is None else key,
                small[len(value)], value, b"\x00",
            ))  # fmt: skip
            append(encode_varint(len(body)))
            append(body)
        else:
            append(_encode_record(offset_delta, delta, key, value, headers))
    return b"".join(encoded), max_timestamp


def _encode_records(records: Sequence[RecordTuple], base_timestamp: int) -> tuple[bytes, int]:
    """The compiled encoder (``kafkaproto._recordbuild``) when built and the types fit
    it (bytes keys/values, str header keys), else the pure-Python one; same bytes."""
    if _compiled_encode is not None:
        try:
            return _compiled_encode(records, base_timestamp)
        except TypeError:
            pass
    return _encode_records_py(records, base_timestamp)


def _finish_batch(
    payload: bytes,
    count: int,
    base_timestamp: int,
    max_timestamp: int,
    base_offset: int,
    compression: Compression,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
    is_transactional: bool,
    timestamp_type: TimestampType,
) -> bytes:
    """Header, optional compression and CRC around an encoded records section."""
    codec = Compression(compression)
    if codec:
        payload = compress(codec, payload)
    attributes = int(codec)
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    out = bytearray(
        _HEADER.pack(
            base_offset,
            MIN_LENGTH + len(payload),
            partition_leader_epoch,
            MAGIC_V2,
            0,
            attributes,
            count - 1,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
    )
    out += payload
    _U32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)
