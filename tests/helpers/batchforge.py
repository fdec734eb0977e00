"""Test-only builders of CRC-valid record batches with arbitrary (also wrong) record fields.

kafkaproto.records.build_batch writes only well-formed batches; these helpers take its
header and replace the payload or header fields, then recompute the CRC, so a test can
hand the validator a batch that only its record walk can refuse.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from crc32c import crc32c

from kafkaproto.batch import BATCH_HEADER_SIZE, LOG_OVERHEAD, Compression
from kafkaproto.compression import compress
from kafkaproto.records import RecordTuple, build_batch
from kafkaproto.varint import encode_varint, encode_varlong

_HEADER = struct.Struct(">qiibIhiqqqhii")
_FIELDS = (
    "base_offset", "length", "partition_leader_epoch", "magic", "crc", "attributes",
    "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id",
    "producer_epoch", "base_sequence", "record_count",
)  # fmt: skip


def raw_record(
    *,
    offset_delta: int,
    timestamp_delta: int = 0,
    key: bytes | None = b"k",
    value: bytes | None = b"v",
    headers: Sequence[tuple[bytes | None, bytes | None]] = (),
    key_length: int | None = None,
    value_length: int | None = None,
    header_count: int | None = None,
    length_adjust: int = 0,
) -> bytes:
    """One record; the *_length/count overrides write a length that lies about the bytes."""
    parts = [b"\x00", encode_varlong(timestamp_delta), encode_varint(offset_delta)]
    parts.append(encode_varint(key_length if key_length is not None else
                               (-1 if key is None else len(key))))
    parts.append(key or b"")
    parts.append(encode_varint(value_length if value_length is not None else
                               (-1 if value is None else len(value))))
    parts.append(value or b"")
    parts.append(encode_varint(len(headers) if header_count is None else header_count))
    for header_key, header_value in headers:
        parts.append(encode_varint(-1 if header_key is None else len(header_key)))
        parts.append(header_key or b"")
        parts.append(encode_varint(-1 if header_value is None else len(header_value)))
        parts.append(header_value or b"")
    body = b"".join(parts)
    return encode_varint(len(body) + length_adjust) + body


def forge(
    payload: bytes,
    *,
    record_count: int,
    compression: Compression = Compression.NONE,
    **header_fields: int,
) -> bytearray:
    """A CRC-valid batch around ``payload`` (compressed with ``compression`` here)."""
    template = build_batch([(b"k", b"v", [], 1_000)])
    fields = dict(zip(_FIELDS, _HEADER.unpack_from(template), strict=True))
    body = compress(compression, payload) if compression else payload
    fields.update(
        length=BATCH_HEADER_SIZE - LOG_OVERHEAD + len(body),
        attributes=int(compression),
        record_count=record_count,
        last_offset_delta=record_count - 1,
    )
    fields.update(header_fields)
    out = bytearray(_HEADER.pack(*(fields[name] for name in _FIELDS)))
    out += body
    return recrc(out)


def recrc(batch: bytearray) -> bytearray:
    """Recompute the CRC-32C after the bytes were changed."""
    struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[21:]))
    return batch


def valid(records: Sequence[RecordTuple], compression: Compression = Compression.NONE) -> bytearray:
    return bytearray(build_batch(records, compression=compression))
