"""Record batch compression codecs as Kafka clients write them: gzip, snappy, lz4, zstd.

All four go through cramjam (one Rust wheel, GIL released). Kafka-specific framing:

- snappy: the Java client (snappy-java ``SnappyOutputStream``) and kafka-python write the
  xerial block framing (``b"\\x82SNAPPY\\x00"``, version and compat i32, then blocks of
  ``i32 length + raw snappy``); librdkafka writes raw snappy. We read both and write
  xerial, which Java, kafka-python, aiokafka and librdkafka all read.
- lz4: the LZ4 frame format with *independent* blocks; Kafka's Java
  ``Lz4BlockInputStream`` decompresses every block on its own, so linked blocks (the lz4
  default) break Java consumers once a batch spans more than one block.
- zstd and gzip: standard frames/members; concatenations are accepted on input.
"""

from __future__ import annotations

import struct

import cramjam

from kafkaproto.batch import Buffer, Compression, CorruptBatchError

__all__ = ["DecompressionError", "compress", "decompress"]

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, min compatible 1
XERIAL_BLOCK_SIZE = 32 * 1024  # snappy-java's default; the uncompressed bytes per block
_XERIAL_HEADER_SIZE = len(XERIAL_HEADER)
_I32 = struct.Struct(">i")

# Java's default Deflater level; kafka-python uses 9, which costs much more for little gain.
DEFAULT_GZIP_LEVEL = 6
# zstd's own default level, as Kafka's ZstdCompression uses.
DEFAULT_ZSTD_LEVEL = 3


class DecompressionError(CorruptBatchError):
    """The compressed records of a batch do not decode: the batch is corrupt."""


def compress(codec: Compression, data: Buffer, level: int | None = None) -> bytes:
    """Compress a batch's record bytes with ``codec``, framed as Kafka clients expect."""
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        return bytes(
            cramjam.gzip.compress(data, level=DEFAULT_GZIP_LEVEL if level is None else level)
        )
    if codec == Compression.SNAPPY:
        return _xerial_snappy_compress(data)
    if codec == Compression.LZ4:
        compressor = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
        compressor.compress(data)
        return bytes(compressor.finish())
    if codec == Compression.ZSTD:
        return bytes(
            cramjam.zstd.compress(data, level=DEFAULT_ZSTD_LEVEL if level is None else level)
        )
    raise ValueError(f"unknown compression codec {codec!r}")


def decompress(codec: Compression, data: Buffer) -> bytes:
    """Decompress a batch's record bytes; raises DecompressionError on undecodable input."""
    if codec == Compression.NONE:
        return bytes(data)
    try:
        if codec == Compression.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == Compression.SNAPPY:
            if bytes(data[: len(XERIAL_MAGIC)]) == XERIAL_MAGIC:
                return _xerial_snappy_decompress(data)
            return bytes(cramjam.snappy.decompress_raw(data))
        if codec == Compression.LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == Compression.ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as exc:
        raise DecompressionError(f"{Compression(codec).name} records do not decode: {exc}") from exc
    raise ValueError(f"unknown compression codec {codec!r}")


def _xerial_snappy_compress(data: Buffer) -> bytes:
    """Write snappy-java's block stream: header, then (i32 length, raw block) pairs."""
    view = memoryview(data)
    parts = [XERIAL_HEADER]
    pack = _I32.pack
    compress_raw = cramjam.snappy.compress_raw
    # An empty input still gets one (empty) block: readers that look for the xerial magic
    # only in streams longer than the header (kafka-python) would otherwise misread it.
    for start in range(0, max(len(view), 1), XERIAL_BLOCK_SIZE):
        block = bytes(compress_raw(view[start : start + XERIAL_BLOCK_SIZE]))
        parts.append(pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _xerial_snappy_decompress(data: Buffer) -> bytes:
    """Read snappy-java's block stream; version/compat are ignored as other readers do."""
    view = memoryview(data)
    end = len(view)
    if end < _XERIAL_HEADER_SIZE:
        raise DecompressionError(f"xerial snappy header truncated: {end} bytes")
    pos = _XERIAL_HEADER_SIZE
    parts: list[bytes] = []
    decompress_raw = cramjam.snappy.decompress_raw
    unpack_from = _I32.unpack_from
    while pos < end:
        if end - pos < 4:
            raise DecompressionError(f"xerial snappy block length truncated at {pos}")
        (size,) = unpack_from(view, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise DecompressionError(
                f"xerial snappy block at {pos - 4} claims {size} bytes, {end - pos} remain"
            )
        parts.append(bytes(decompress_raw(view[pos : pos + size])))
        pos += size
    return b"".join(parts)
