"""kafkaproto.compression against kafka-python's independent kafka.codec."""

from __future__ import annotations

import gzip
import os
import struct

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as kcodec

from kafkaproto.batch import Compression, CorruptBatchError
from kafkaproto.compression import (
    REUSED_OUTPUT_MAX,
    XERIAL_BLOCK_SIZE,
    XERIAL_HEADER,
    XERIAL_MAGIC,
    DecompressionBombError,
    DecompressionError,
    compress,
    decompress,
    decompress_capped,
    decompress_capped_view,
)

COMPRESSED = [c for c in Compression if c is not Compression.NONE]

KAFKA_PYTHON_ENCODE = {
    Compression.GZIP: kcodec.gzip_encode,
    Compression.SNAPPY: kcodec.snappy_encode,
    Compression.LZ4: kcodec.lz4_encode,
    Compression.ZSTD: kcodec.zstd_encode,
}
KAFKA_PYTHON_DECODE = {
    Compression.GZIP: kcodec.gzip_decode,
    Compression.SNAPPY: kcodec.snappy_decode,
    Compression.LZ4: kcodec.lz4_decode,
    Compression.ZSTD: kcodec.zstd_decode,
}

SAMPLES = [
    b"",
    b"a",
    b"hello kafka " * 100,
    os.urandom(1000),
    # Larger than one xerial block and one lz4 64 KiB block, partly compressible.
    (os.urandom(64) * 300 + os.urandom(30_000)) * 3,
]


@pytest.mark.parametrize("data", SAMPLES, ids=lambda d: f"{len(d)}B")
@pytest.mark.parametrize("codec", list(Compression))
def test_round_trip(codec: Compression, data: bytes) -> None:
    packed = compress(codec, data)
    assert isinstance(packed, bytes)
    assert decompress(codec, packed) == data
    assert decompress(codec, memoryview(packed)) == data
    assert decompress(codec, bytearray(packed)) == data


@pytest.mark.parametrize("data", SAMPLES, ids=lambda d: f"{len(d)}B")
@pytest.mark.parametrize("codec", COMPRESSED)
def test_kafka_python_reads_ours(codec: Compression, data: bytes) -> None:
    assert KAFKA_PYTHON_DECODE[codec](compress(codec, data)) == data


@pytest.mark.parametrize("data", SAMPLES, ids=lambda d: f"{len(d)}B")
@pytest.mark.parametrize("codec", COMPRESSED)
def test_we_read_kafka_python(codec: Compression, data: bytes) -> None:
    assert decompress(codec, KAFKA_PYTHON_ENCODE[codec](data)) == data


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=5000), codec=st.sampled_from(COMPRESSED))
def test_cross_check_random(codec: Compression, data: bytes) -> None:
    assert KAFKA_PYTHON_DECODE[codec](compress(codec, data)) == data
    assert decompress(codec, KAFKA_PYTHON_ENCODE[codec](data)) == data


def test_none_is_identity() -> None:
    assert compress(Compression.NONE, memoryview(b"abc")) == b"abc"
    assert decompress(Compression.NONE, bytearray(b"abc")) == b"abc"


def test_snappy_writes_xerial_framing() -> None:
    data = os.urandom(10) * 10_000  # 100 000 bytes: four 32 KiB blocks
    packed = compress(Compression.SNAPPY, data)
    assert packed[:8] == XERIAL_MAGIC
    assert struct.unpack(">ii", packed[8:16]) == (1, 1)
    pos, blocks = 16, []
    while pos < len(packed):
        (size,) = struct.unpack_from(">i", packed, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + size])))
        pos += 4 + size
    assert pos == len(packed)
    assert [len(b) for b in blocks] == [XERIAL_BLOCK_SIZE] * 3 + [100_000 - 3 * XERIAL_BLOCK_SIZE]
    assert b"".join(blocks) == data
    # Byte-identical to kafka-python's xerial writer (same block size, same raw codec output).
    assert kcodec.snappy_encode(data) == packed


def test_snappy_reads_raw_block_as_librdkafka_writes() -> None:
    data = b"raw snappy from librdkafka " * 50
    raw = kcodec.snappy_encode(data, xerial_compatible=False)
    assert not raw.startswith(XERIAL_MAGIC)
    assert decompress(Compression.SNAPPY, raw) == data


def test_snappy_xerial_tolerates_little_endian_version_fields() -> None:
    # Redpanda once wrote version/compat little-endian; readers ignore the fields.
    data = b"x" * 1000
    packed = bytearray(compress(Compression.SNAPPY, data))
    packed[8:16] = struct.pack("<ii", 1, 1)
    assert decompress(Compression.SNAPPY, packed) == data


def test_snappy_xerial_empty() -> None:
    packed = compress(Compression.SNAPPY, b"")
    assert len(packed) > 16  # one empty block, so kafka-python detects the framing
    assert kcodec.snappy_decode(packed) == b""
    assert decompress(Compression.SNAPPY, packed) == b""
    assert decompress(Compression.SNAPPY, XERIAL_HEADER) == b""  # header and no block


@pytest.mark.parametrize(
    "bad",
    [
        XERIAL_MAGIC + b"\x00\x00\x00\x01",  # header cut short
        XERIAL_MAGIC + struct.pack(">ii", 1, 1) + b"\x00\x00",  # block length cut short
        XERIAL_MAGIC + struct.pack(">iii", 1, 1, 100) + b"abc",  # block cut short
        XERIAL_MAGIC + struct.pack(">iii", 1, 1, -4),  # negative block length
        XERIAL_MAGIC + struct.pack(">iii", 1, 1, 3) + b"\xff\xff\xff",  # garbage block
    ],
)
def test_snappy_xerial_garbage(bad: bytes) -> None:
    with pytest.raises(DecompressionError):
        decompress(Compression.SNAPPY, bad)


def test_lz4_frame_has_independent_blocks_as_java_requires() -> None:
    packed = compress(Compression.LZ4, os.urandom(100) * 2000)
    assert packed[:4] == b"\x04\x22\x4d\x18"
    flg = packed[4]
    assert flg >> 6 == 0b01  # version 1
    assert flg & 0x20  # block independence
    assert packed[5] >> 4 & 0x7 in (4, 5, 6, 7)  # a block max size Java knows


def test_lz4_reads_linked_blocks_and_content_checksum() -> None:
    data = os.urandom(100) * 3000
    linked = lz4.frame.compress(data, block_linked=True, content_checksum=True, store_size=True)
    assert decompress(Compression.LZ4, linked) == data


def test_gzip_reads_concatenated_members() -> None:
    assert decompress(Compression.GZIP, gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"


def test_zstd_reads_streamed_frame_without_content_size() -> None:
    # Java's zstd-jni output stream writes frames without the content size field.
    data = b"streamed " * 5000
    compressor = zstandard.ZstdCompressor(write_content_size=False)
    chunker = compressor.chunker()
    packed = b"".join([*chunker.compress(data), *chunker.finish()])
    assert decompress(Compression.ZSTD, packed) == data


def test_zstd_reads_concatenated_frames() -> None:
    packed = compress(Compression.ZSTD, b"one") + compress(Compression.ZSTD, b"two")
    assert decompress(Compression.ZSTD, packed) == b"onetwo"


def test_levels() -> None:
    data = b"level " * 1000
    for codec in (Compression.GZIP, Compression.ZSTD, Compression.LZ4):
        assert decompress(codec, compress(codec, data, level=1)) == data


@pytest.mark.parametrize("codec", COMPRESSED)
@pytest.mark.parametrize("bad", [b"\x05", b"not compressed at all, surely", b"\xff" * 64])
def test_garbage_raises_decompression_error(codec: Compression, bad: bytes) -> None:
    with pytest.raises(DecompressionError) as info:
        decompress(codec, bad)
    assert isinstance(info.value, CorruptBatchError)


@pytest.mark.parametrize("codec", COMPRESSED)
def test_truncated_raises_decompression_error(codec: Compression) -> None:
    packed = compress(codec, os.urandom(5000))
    with pytest.raises(DecompressionError):
        decompress(codec, packed[: len(packed) // 2])


def test_unknown_codec() -> None:
    with pytest.raises(ValueError):
        compress(5, b"x")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        decompress(5, b"x")  # type: ignore[arg-type]


def _zstd_frames_without_content_size(data: bytes) -> bytes:
    """As a streaming compressor (librdkafka, zstd-jni) writes it: no content size."""
    return zstandard.ZstdCompressor(write_content_size=False).compress(data)


@pytest.mark.parametrize("frame", [
    lambda d: compress(Compression.ZSTD, d),
    _zstd_frames_without_content_size,
    lambda d: compress(Compression.ZSTD, d[:1000]) + _zstd_frames_without_content_size(d[1000:]),
], ids=["content-size", "streamed", "two-frames"])
def test_zstd_view_reads_what_the_copying_reader_reads_and_stops_at_the_cap(frame) -> None:
    data = os.urandom(40_000).hex().encode()  # 80,000 bytes
    compressed = frame(data)
    assert bytes(decompress_capped_view(Compression.ZSTD, compressed, len(data))) == data
    with pytest.raises(DecompressionBombError):
        decompress_capped_view(Compression.ZSTD, compressed, len(data) - 1)
    with pytest.raises(DecompressionError):
        decompress_capped_view(Compression.ZSTD, compressed[:-3], len(data))


def test_zstd_view_reuses_one_buffer_per_thread_without_leftovers() -> None:
    """A shorter batch after a longer one: only its own bytes, from the same buffer."""
    long, short = b"L" * 50_000, b"s" * 10
    first = decompress_capped_view(Compression.ZSTD, compress(Compression.ZSTD, long), 1 << 20)
    assert bytes(first) == long
    second = decompress_capped_view(Compression.ZSTD, compress(Compression.ZSTD, short), 1 << 20)
    assert bytes(second) == short
    assert memoryview(second).obj is memoryview(first).obj  # the same bytearray


def test_view_of_other_codecs_and_large_caps_is_a_fresh_copy() -> None:
    data = b"x" * 1000
    for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4):
        assert decompress_capped_view(codec, compress(codec, data), 1000) == data
    big_cap = REUSED_OUTPUT_MAX + 1
    out = decompress_capped_view(Compression.ZSTD, compress(Compression.ZSTD, data), big_cap)
    assert isinstance(out, bytes) and out == data


def _lz4(data: bytes, **options: object) -> bytes:
    return lz4.frame.compress(data, **{"block_linked": False, "content_checksum": False,
                                       **options})


@pytest.mark.parametrize("frame", [
    lambda d: compress(Compression.LZ4, d),
    lambda d: _lz4(d, store_size=True),
    lambda d: _lz4(d, block_size=lz4.frame.BLOCKSIZE_MAX1MB),
    lambda d: _lz4(d[:5000]) + _lz4(d[5000:]),
    lambda d: _lz4(d, compression_level=0),
    lambda d: lz4.frame.compress(d),  # linked blocks and a content checksum: the copying reader
    lambda d: _lz4(d, block_checksum=True),
], ids=["ours", "content-size", "1MB-blocks", "two-frames", "level-0", "linked", "block-checksum"])
def test_lz4_view_reads_what_the_copying_reader_reads_and_stops_at_the_cap(frame) -> None:
    data = os.urandom(60_000).hex().encode() + os.urandom(70_000)  # compressible, then not
    compressed = frame(data)
    assert bytes(decompress_capped_view(Compression.LZ4, compressed, len(data))) == data
    with pytest.raises(DecompressionBombError):
        decompress_capped_view(Compression.LZ4, compressed, len(data) - 1)
    with pytest.raises(DecompressionError):
        decompress_capped_view(Compression.LZ4, compressed[:-5], len(data))


def test_lz4_view_of_kafka_style_frames_is_the_reused_buffer() -> None:
    """Independent blocks without checksums (the Java client, librdkafka): no copy per
    batch. Ours and kafka-python's frames (block checksums; linked blocks) are copied."""
    data = os.urandom(100_000).hex().encode()  # several 64 KiB blocks
    zstd_out = decompress_capped_view(Compression.ZSTD, compress(Compression.ZSTD, b"z"), 1 << 20)
    out = decompress_capped_view(Compression.LZ4, _lz4(data), 1 << 20)
    assert isinstance(out, memoryview) and bytes(out) == data
    assert out.obj is memoryview(zstd_out).obj
    for copied in (compress(Compression.LZ4, data), lz4.frame.compress(data)):
        result = decompress_capped_view(Compression.LZ4, copied, 1 << 20)
        assert isinstance(result, bytes) and result == data


def test_lz4_view_refuses_what_the_copying_reader_refuses() -> None:
    good = compress(Compression.LZ4, os.urandom(20_000).hex().encode())
    header = 7
    bad_descriptor = good[:4] + bytes([good[4] ^ 0x40]) + good[5:]  # version bits
    bad_checksum = good[:header - 1] + bytes([good[header - 1] ^ 0xFF]) + good[header:]
    bad_block = good[:header + 10] + b"\xff" * 40 + good[header + 50:]
    for bad in (bad_descriptor, bad_checksum, bad_block, good + b"xy", b"\x04\x22\x4d\x18"):
        with pytest.raises(DecompressionError):
            decompress_capped(Compression.LZ4, bad, 1 << 20)
        with pytest.raises(DecompressionError):
            decompress_capped_view(Compression.LZ4, bad, 1 << 20)
