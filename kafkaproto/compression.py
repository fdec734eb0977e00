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

``decompress_capped`` is the one to use on bytes from the network or the log: it
streams (zlib, ``zstandard``, ``lz4.frame``; snappy's per-block length header is checked
before the block is inflated), so a small batch that inflates to gigabytes costs at most
the cap plus one codec window, never the whole expansion.
"""

from __future__ import annotations

import struct
import threading
import zlib
from typing import TYPE_CHECKING

from kafkaproto.lazy_import import LazyModule

if TYPE_CHECKING:
    import cramjam
    import lz4.frame  # no type stubs: covered by ignore_missing_imports (pyproject)
    import zstandard
else:  # imported on first use: a server whose clients never compress holds none (~3 MB)
    cramjam = LazyModule("cramjam", globals())
    lz4 = LazyModule("lz4", globals(), "lz4.frame")
    zstandard = LazyModule("zstandard", globals())

from kafkaproto.batch import Buffer, Compression, CorruptBatchError

__all__ = [
    "DecompressionBombError",
    "DecompressionError",
    "compress",
    "decompress",
    "decompress_capped",
    "decompress_capped_view",
]

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


class DecompressionBombError(DecompressionError):
    """The compressed records inflate past the allowed size (``message.max.bytes``)."""


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


# zstd frames may ask for a window up to 2**31; a decoder allocates it before any output.
# Producers use at most 8 MiB (level 19 and below); larger caps raise the limit with them.
_ZSTD_MIN_WINDOW_LIMIT = 8 << 20
# Output chunk for the streaming readers: bounds the overshoot past the cap.
_STREAM_CHUNK = 256 * 1024


def decompress_capped(codec: Compression, data: Buffer, max_bytes: int) -> bytes:
    """Decompress like ``decompress`` but refuse to produce more than ``max_bytes``.

    Raises DecompressionBombError when the output would pass ``max_bytes`` (memory use
    stays near ``max_bytes`` plus one codec window) and DecompressionError on input that
    does not decode.
    """
    if max_bytes < 0:
        raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
    if codec == Compression.NONE:
        if len(data) > max_bytes:
            raise DecompressionBombError(
                f"uncompressed records of {len(data)} bytes exceed the cap of {max_bytes}"
            )
        return bytes(data)
    try:
        if codec == Compression.GZIP:
            return _gzip_capped(data, max_bytes)
        if codec == Compression.SNAPPY:
            if bytes(data[: len(XERIAL_MAGIC)]) == XERIAL_MAGIC:
                return _xerial_snappy_capped(data, max_bytes)
            return _raw_snappy_capped(data, max_bytes, 0)
        if codec == Compression.LZ4:
            return _lz4_capped(data, max_bytes)
        if codec == Compression.ZSTD:
            return _zstd_capped(data, max_bytes)
    except DecompressionBombError:
        raise
    except DecompressionError as exc:
        raise DecompressionError(f"{Compression(codec).name} records do not decode: {exc}") from exc
    except (cramjam.DecompressionError, zlib.error, zstandard.ZstdError, RuntimeError) as exc:
        # lz4.frame reports bad frames as RuntimeError.
        raise DecompressionError(f"{Compression(codec).name} records do not decode: {exc}") from exc
    raise ValueError(f"unknown compression codec {codec!r}")


def _bomb(codec: Compression, max_bytes: int) -> DecompressionBombError:
    return DecompressionBombError(
        f"{codec.name} records inflate past the cap of {max_bytes} bytes"
    )


def _gzip_capped(data: Buffer, max_bytes: int) -> bytes:
    """Inflate gzip members one after another, asking zlib for at most the room left."""
    parts: list[bytes] = []
    total = 0
    pending: Buffer = data
    while True:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        while True:
            chunk = inflater.decompress(pending, max_bytes - total + 1)
            total += len(chunk)
            if total > max_bytes:
                raise _bomb(Compression.GZIP, max_bytes)
            parts.append(chunk)
            pending = inflater.unconsumed_tail
            if inflater.eof:
                break
            if not pending:
                raise DecompressionError(f"GZIP records truncated after {total} bytes of output")
        pending = inflater.unused_data
        if not pending:
            return b"".join(parts)


def _snappy_length(view: memoryview, pos: int, end: int) -> int:
    """The uncompressed length a raw snappy block announces (unsigned varint, <= 5 bytes)."""
    result = 0
    for shift in range(0, 35, 7):
        if pos >= end:
            raise DecompressionError("SNAPPY block length header truncated")
        byte = view[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result
    raise DecompressionError("SNAPPY block length header longer than 5 bytes")


def _raw_snappy_capped(data: Buffer, max_bytes: int, already: int) -> bytes:
    view = memoryview(data)
    if already + _snappy_length(view, 0, len(view)) > max_bytes:
        raise _bomb(Compression.SNAPPY, max_bytes)
    return bytes(cramjam.snappy.decompress_raw(view))


def _xerial_snappy_capped(data: Buffer, max_bytes: int) -> bytes:
    """Xerial blocks, each block's announced length checked before it is inflated."""
    view = memoryview(data)
    end = len(view)
    if end < _XERIAL_HEADER_SIZE:
        raise DecompressionError(f"xerial snappy header truncated: {end} bytes")
    pos = _XERIAL_HEADER_SIZE
    parts: list[bytes] = []
    total = 0
    while pos < end:
        if end - pos < 4:
            raise DecompressionError(f"xerial snappy block length truncated at {pos}")
        (size,) = _I32.unpack_from(view, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise DecompressionError(
                f"xerial snappy block at {pos - 4} claims {size} bytes, {end - pos} remain"
            )
        block = _raw_snappy_capped(view[pos : pos + size], max_bytes, total)
        total += len(block)
        parts.append(block)
        pos += size
    return b"".join(parts)


def _lz4_capped(data: Buffer, max_bytes: int) -> bytes:
    """LZ4 frames one after another, asking the decoder for at most the room left."""
    parts: list[bytes] = []
    total = 0
    pending: Buffer = data
    while True:
        decoder = lz4.frame.LZ4FrameDecompressor()
        while True:
            chunk = decoder.decompress(pending, max_length=max_bytes - total + 1)
            pending = b""
            total += len(chunk)
            if total > max_bytes:
                raise _bomb(Compression.LZ4, max_bytes)
            parts.append(chunk)
            if decoder.eof:
                break
            if decoder.needs_input:
                raise DecompressionError(f"LZ4 records truncated after {total} bytes of output")
        pending = decoder.unused_data or b""
        if not pending:
            return b"".join(parts)


# Per thread: zstd decoders (by window limit) and the output buffer decompress_capped_view
# reuses. A decoder allocates its context and window (up to 8 MiB) when created; a new one
# per batch, and a new output buffer per batch, cost fresh pages from the kernel each
# time in a busy server (their page faults measured at twice the decompression itself).
_per_thread = threading.local()
#: Largest output buffer a thread keeps between calls (message.max.bytes is ~1 MB by
#: default); larger caps decompress into fresh memory, a chunk at a time.
REUSED_OUTPUT_MAX = 8 << 20


def _zstd_decoder(max_bytes: int) -> zstandard.ZstdDecompressor:
    """This thread's decoder for frames decompressing to at most ``max_bytes``."""
    window_limit = max(_ZSTD_MIN_WINDOW_LIMIT, 1 << max(max_bytes - 1, 1).bit_length())
    decoders: dict[int, zstandard.ZstdDecompressor] | None = getattr(_per_thread, "zstd", None)
    if decoders is None:
        decoders = _per_thread.zstd = {}
    decoder = decoders.get(window_limit)
    if decoder is None:
        decoder = decoders[window_limit] = zstandard.ZstdDecompressor(
            max_window_size=window_limit)
    return decoder


def _output_buffer(size: int) -> memoryview:
    """This thread's reused output buffer, at least ``size`` bytes."""
    buffer: memoryview | None = getattr(_per_thread, "output", None)
    if buffer is None or len(buffer) < size:
        buffer = _per_thread.output = memoryview(bytearray(size))
    return buffer


def decompress_capped_view(codec: Compression, data: Buffer, max_bytes: int) -> Buffer:
    """``decompress_capped`` for callers that only read the output before their thread's
    next call (the validation walk): zstd output lands in a buffer this thread reuses,
    so nothing the size of the output is allocated per batch. Other codecs, and caps
    above REUSED_OUTPUT_MAX, return what ``decompress_capped`` returns."""
    if codec not in (Compression.ZSTD, Compression.LZ4) or not 0 <= max_bytes < REUSED_OUTPUT_MAX:
        return decompress_capped(codec, data, max_bytes)
    view = memoryview(data)
    try:
        if codec == Compression.ZSTD:
            return _zstd_into_reused(view, max_bytes)
        out = _lz4_into_reused(view, max_bytes)
        return decompress_capped(codec, data, max_bytes) if out is None else out
    except DecompressionBombError:
        raise
    except DecompressionError as exc:
        raise DecompressionError(f"{codec.name} records do not decode: {exc}") from exc
    except (zstandard.ZstdError, cramjam.DecompressionError, RuntimeError) as exc:
        raise DecompressionError(f"{codec.name} records do not decode: {exc}") from exc


_LZ4_MAGIC = 0x184D2204
_LZ4_SKIPPABLE_MASK = 0xFFFFFFF0
_LZ4_SKIPPABLE_MAGIC = 0x184D2A50
_LZ4_BLOCK_MAX = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}
_LZ4_UNCOMPRESSED = 0x80000000


def _lz4_into_reused(view: memoryview, max_bytes: int) -> memoryview | None:
    """LZ4 frames as Kafka's Java client and librdkafka write them (independent blocks,
    no block or content checksum) decoded block by block straight into this thread's
    buffer; None for any other kind of frame (linked blocks as kafka-python writes,
    block checksums as ours has, dictionaries), which the copying reader handles.
    The frame descriptor and its checksum are checked by the lz4 library."""
    end = len(view)
    room = max_bytes + 1
    out = _output_buffer(room)
    total = pos = 0
    if end == 0:
        raise DecompressionError("LZ4 records are empty: no frame")
    while pos < end:
        if end - pos < 4:
            raise DecompressionError(f"LZ4 frame magic truncated at byte {pos}")
        (magic,) = _U32_LE.unpack_from(view, pos)
        if magic & _LZ4_SKIPPABLE_MASK == _LZ4_SKIPPABLE_MAGIC:
            if end - pos < 8:
                raise DecompressionError(f"LZ4 skippable frame at byte {pos} truncated")
            pos += 8 + _U32_LE.unpack_from(view, pos + 4)[0]
            if pos > end:
                raise DecompressionError("LZ4 skippable frame runs past the records")
            continue
        if magic != _LZ4_MAGIC:
            raise DecompressionError(f"LZ4 frame at byte {pos} has bad magic {magic:#010x}")
        if end - pos < 7:
            raise DecompressionError("LZ4 frame descriptor truncated")
        flags = view[pos + 4]
        if flags & 0x15 or not flags & 0x20:  # dictionary, checksums, linked blocks
            return None
        header = 7 + (8 if flags & 0x08 else 0)
        info = lz4.frame.get_frame_info(view[pos : pos + header])  # checks the descriptor
        block_max = _LZ4_BLOCK_MAX[info["block_size_id"]]
        pos += header
        while True:
            if end - pos < 4:
                raise DecompressionError(f"LZ4 block size truncated at byte {pos}")
            (size,) = _U32_LE.unpack_from(view, pos)
            pos += 4
            if size == 0:
                break  # EndMark
            stored = size & _LZ4_UNCOMPRESSED
            size &= ~_LZ4_UNCOMPRESSED
            if size > end - pos:
                raise DecompressionError(f"LZ4 block at byte {pos - 4} runs past the records")
            if stored:
                if size > block_max:
                    raise DecompressionError(f"LZ4 stored block of {size} bytes > {block_max}")
                if total + size > max_bytes:
                    raise _bomb(Compression.LZ4, max_bytes)
                out[total : total + size] = view[pos : pos + size]
                total += size
            else:
                limit = min(block_max, room - total)
                try:
                    total += cramjam.lz4.decompress_block_into(
                        view[pos : pos + size], out[total : total + limit])
                except cramjam.DecompressionError:
                    if limit < block_max:  # perhaps a good block, but past the cap
                        raise _bomb(Compression.LZ4, max_bytes) from None
                    raise
                if total > max_bytes:
                    raise _bomb(Compression.LZ4, max_bytes)
            pos += size
    return out[:total]


def _zstd_into_reused(view: memoryview, max_bytes: int) -> memoryview:
    """Whole frames checked, then read straight into this thread's buffer, cap + 1 at most."""
    _check_zstd_frames(view, max_bytes)
    room = max_bytes + 1
    out = _output_buffer(room)
    total = 0
    with _zstd_decoder(max_bytes).stream_reader(view, read_across_frames=True) as reader:
        while total < room:
            n = reader.readinto(out[total:room])
            if not n:
                break
            total += n
    if total > max_bytes:
        raise _bomb(Compression.ZSTD, max_bytes)
    return out[:total]


def _zstd_capped(data: Buffer, max_bytes: int) -> bytes:
    """Check the frames are whole, then read them a chunk at a time until the cap.

    The stream reader alone returns a truncated frame's partial output without an
    error, so the frame and block headers are walked first (a few per 128 KiB).
    """
    view = memoryview(data)
    _check_zstd_frames(view, max_bytes)
    decoder = _zstd_decoder(max_bytes)
    parts: list[bytes] = []
    total = 0
    with decoder.stream_reader(view, read_across_frames=True) as reader:
        while True:
            chunk = reader.read(min(_STREAM_CHUNK, max_bytes - total + 1))
            if not chunk:
                break
            total += len(chunk)
            if total > max_bytes:
                raise _bomb(Compression.ZSTD, max_bytes)
            parts.append(chunk)
    return b"".join(parts)


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MASK = 0xFFFFFFF0
_ZSTD_SKIPPABLE_MAGIC = 0x184D2A50
_U32_LE = struct.Struct("<I")
_ZSTD_DICT_ID_SIZES = (0, 1, 2, 4)
_ZSTD_CONTENT_SIZE_SIZES = (0, 2, 4, 8)  # flag 0 means 1 byte in single-segment frames


def _check_zstd_frames(view: memoryview, max_bytes: int) -> None:
    """Walk frame and block headers (RFC 8878): every frame complete, nothing after them.

    A declared content size past the cap is refused here, before any inflation.
    """
    end = len(view)
    pos = 0
    declared = 0
    if end == 0:
        raise DecompressionError("ZSTD records are empty: no frame")
    while pos < end:
        if end - pos < 4:
            raise DecompressionError(f"ZSTD frame magic truncated at byte {pos}")
        (magic,) = _U32_LE.unpack_from(view, pos)
        if magic & _ZSTD_SKIPPABLE_MASK == _ZSTD_SKIPPABLE_MAGIC:
            if end - pos < 8:
                raise DecompressionError(f"ZSTD skippable frame at byte {pos} truncated")
            pos += 8 + _U32_LE.unpack_from(view, pos + 4)[0]
            if pos > end:
                raise DecompressionError("ZSTD skippable frame runs past the records")
            continue
        if magic != _ZSTD_MAGIC:
            raise DecompressionError(f"ZSTD frame at byte {pos} has bad magic {magic:#010x}")
        pos += 4
        if pos >= end:
            raise DecompressionError("ZSTD frame header truncated")
        descriptor = view[pos]
        pos += 1
        if descriptor & 0x08:
            raise DecompressionError("ZSTD frame header sets the reserved bit")
        single_segment = descriptor & 0x20
        size_flag = descriptor >> 6
        size_bytes = _ZSTD_CONTENT_SIZE_SIZES[size_flag] or (1 if single_segment else 0)
        header_rest = (0 if single_segment else 1) + _ZSTD_DICT_ID_SIZES[descriptor & 3]
        if end - pos < header_rest + size_bytes:
            raise DecompressionError("ZSTD frame header truncated")
        pos += header_rest
        if size_bytes:
            content_size = int.from_bytes(view[pos : pos + size_bytes], "little")
            if size_bytes == 2:
                content_size += 256
            declared += content_size
            if declared > max_bytes:
                raise _bomb(Compression.ZSTD, max_bytes)
            pos += size_bytes
        while True:
            if end - pos < 3:
                raise DecompressionError(f"ZSTD block header truncated at byte {pos}")
            block = int.from_bytes(view[pos : pos + 3], "little")
            pos += 3
            block_type = (block >> 1) & 3
            if block_type == 3:
                raise DecompressionError(f"ZSTD block at byte {pos - 3} has the reserved type")
            pos += 1 if block_type == 1 else block >> 3
            if pos > end:
                raise DecompressionError("ZSTD block runs past the records")
            if block & 1:
                break
        if descriptor & 0x04:
            pos += 4
            if pos > end:
                raise DecompressionError("ZSTD frame checksum truncated")
