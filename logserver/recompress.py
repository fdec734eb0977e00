"""Broker-side recompression: a topic's ``compression.type`` applied to produced batches.

As in Kafka, ``compression.type=producer`` (the default) stores each batch as the
producer compressed it; a codec name (``gzip``, ``snappy``, ``lz4``, ``zstd``) or
``uncompressed`` has every produced batch in another codec rewritten into the topic's
before it is appended. Only the records section is inflated (capped at
``max.message.bytes``, as validation caps it) and deflated again: the record bytes
(offset and timestamp deltas, keys, values, headers) stay as they are, so there is no
per-record Python work, and the header keeps base offset, timestamps, producer
id/epoch/base sequence and the transactional and timestamp-type bits; only the codec
bits, the length and the CRC change. ``Partition`` runs this on a pool thread, never on
the event loop, and only when the codecs differ.
"""

from __future__ import annotations

import struct

from kafkaproto.batch import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CRC_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    RECORDS_OFFSET,
    BatchHeader,
    Buffer,
    Compression,
    compute_crc,
)
from kafkaproto.compression import compress, decompress_capped
from logserver.topic_config import TopicConfig

__all__ = ["TOPIC_CODECS", "Recompression", "recompress"]

#: compression.type -> the codec batches are stored in (None: the producer's own)
TOPIC_CODECS: dict[str, Compression | None] = {
    "producer": None,
    "uncompressed": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")


class Recompression:
    """A topic's target codec and level, read from its config once per (re)configure."""

    __slots__ = ("codec", "level")

    def __init__(self, config: TopicConfig) -> None:
        self.codec = TOPIC_CODECS[config.compression_type]
        self.level: int | None = None
        if self.codec == Compression.GZIP and config.compression_gzip_level >= 0:
            self.level = config.compression_gzip_level
        elif self.codec == Compression.LZ4:
            self.level = config.compression_lz4_level
        elif self.codec == Compression.ZSTD:
            self.level = config.compression_zstd_level

    def wanted(self, records: Buffer | None) -> bool:
        """Whether this produced batch is in another codec than the topic's (a look at
        one header byte: the default, ``producer``, costs nothing more)."""
        return (self.codec is not None and records is not None
                and len(records) >= BATCH_HEADER_SIZE
                and records[ATTRIBUTES_OFFSET + 1] & COMPRESSION_MASK != self.codec)

    def apply(self, batch: Buffer, header: BatchHeader, max_uncompressed_bytes: int) -> bytearray:
        assert self.codec is not None
        return recompress(batch, header, self.codec, max_uncompressed_bytes=max_uncompressed_bytes,
                          level=self.level)


def recompress(batch: Buffer, header: BatchHeader, codec: Compression, *,
               max_uncompressed_bytes: int, level: int | None = None) -> bytearray:
    """``batch`` (one validated batch) with its records in ``codec``.

    Raises DecompressionBombError when the records inflate past
    ``max_uncompressed_bytes`` and DecompressionError when they do not decode (both
    CorruptBatchError).
    """
    view = memoryview(batch)
    payload = view[RECORDS_OFFSET:header.size]
    raw = decompress_capped(header.compression, payload, max_uncompressed_bytes)
    packed = compress(codec, raw, level) if codec != Compression.NONE else raw
    out = bytearray(RECORDS_OFFSET + len(packed))
    out[:RECORDS_OFFSET] = view[:RECORDS_OFFSET]
    out[RECORDS_OFFSET:] = packed
    _I32.pack_into(out, LENGTH_OFFSET, len(out) - LOG_OVERHEAD)
    _I16.pack_into(out, ATTRIBUTES_OFFSET, (header.attributes & ~COMPRESSION_MASK) | codec)
    _U32.pack_into(out, CRC_OFFSET, compute_crc(out, 0, len(out)))
    return out
