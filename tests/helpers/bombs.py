"""Test-only decompression bombs: small compressed payloads that inflate to ``size`` zeros.

Built a chunk at a time so the test process never holds the inflated bytes itself.
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import lz4.frame
import zstandard

from kafkaproto.batch import Compression
from kafkaproto.compression import XERIAL_BLOCK_SIZE, XERIAL_HEADER

_CHUNK = 1 << 20


def zeros_bomb(codec: Compression, size: int) -> bytes:
    """``size`` zero bytes compressed as a Kafka client would frame them."""
    zero = bytes(_CHUNK)
    chunks = size // _CHUNK
    if codec == Compression.GZIP:
        deflater = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return b"".join([deflater.compress(zero) for _ in range(chunks)] + [deflater.flush()])
    if codec == Compression.ZSTD:
        zstd = zstandard.ZstdCompressor(level=3).compressobj()
        return b"".join([zstd.compress(zero) for _ in range(chunks)] + [zstd.flush()])
    if codec == Compression.LZ4:
        lz4_frame = lz4.frame.LZ4FrameCompressor(block_linked=False)
        parts = [lz4_frame.begin()] + [lz4_frame.compress(zero) for _ in range(chunks)]
        return b"".join(parts + [lz4_frame.flush()])
    if codec == Compression.SNAPPY:
        block = bytes(cramjam.snappy.compress_raw(bytes(XERIAL_BLOCK_SIZE)))
        framed = struct.pack(">i", len(block)) + block
        return XERIAL_HEADER + framed * (size // XERIAL_BLOCK_SIZE)
    raise ValueError(f"no bomb for {codec!r}")


def raw_snappy_claiming(size: int) -> bytes:
    """Raw (librdkafka-style) snappy whose length header announces ``size`` bytes."""
    body = bytes(cramjam.snappy.compress_raw(bytes(1024)))
    header_len = 2  # 1024 needs a two-byte varint
    claim = bytearray()
    value = size
    while value >= 0x80:
        claim.append((value & 0x7F) | 0x80)
        value >>= 7
    claim.append(value)
    return bytes(claim) + body[header_len:]
