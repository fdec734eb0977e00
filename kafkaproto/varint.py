"""Zig-zag varints (int32) and varlongs (int64) as Kafka's ByteUtils reads and writes them.

Kafka rejects a varint longer than 5 bytes and a varlong longer than 10; so do we,
because an over-long encoding means the bytes are not what a Kafka client wrote.
Decoders take ``(buf, pos)`` and return ``(value, new_pos)`` so callers can walk a
buffer without slicing it.
"""

from __future__ import annotations

__all__ = [
    "VarintError",
    "decode_varint",
    "decode_varlong",
    "encode_varint",
    "encode_varlong",
    "varint_size",
    "varlong_size",
]

_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

# Encodings of zig-zag values below 2**14 (1 or 2 bytes), each made on first use: most
# lengths, deltas and counts in a record batch hit this table instead of the loop. All
# 16,384 made at import were 0.7 MB in every process (issue 27).
_SMALL: list[bytes | None] = [None] * (1 << 14)


class VarintError(ValueError):
    """Bytes that are not a valid Kafka varint (truncated or too long)."""


def _encode_unsigned(z: int) -> bytes:
    if z < 1 << 14:
        b = _SMALL[z]
        if b is None:
            b = _SMALL[z] = bytes((z,)) if z < 0x80 else bytes(((z & 0x7F) | 0x80, z >> 7))
        return b
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Zig-zag encode a signed 32-bit integer."""
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise OverflowError(f"varint {value} is outside int32")
    return _encode_unsigned((value << 1) ^ (value >> 31))


def encode_varlong(value: int) -> bytes:
    """Zig-zag encode a signed 64-bit integer."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise OverflowError(f"varlong {value} is outside int64")
    return _encode_unsigned((value << 1) ^ (value >> 63))


def varint_size(value: int) -> int:
    """Encoded size in bytes of ``encode_varint(value)``."""
    z = ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF
    return max(1, (z.bit_length() + 6) // 7)


def varlong_size(value: int) -> int:
    """Encoded size in bytes of ``encode_varlong(value)``."""
    z = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    return max(1, (z.bit_length() + 6) // 7)


def _decode(buf: bytes | bytearray | memoryview, pos: int, max_bytes: int) -> tuple[int, int]:
    result = 0
    shift = 0
    end = pos + max_bytes
    try:
        while pos < end:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return (result >> 1) ^ -(result & 1), pos
            shift += 7
    except IndexError:
        raise VarintError(f"varint truncated at byte {pos}") from None
    raise VarintError(f"varint longer than {max_bytes} bytes at byte {pos - max_bytes}")


def decode_varint(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Decode a zig-zag varint at ``pos``: (value, position after it)."""
    b = buf[pos] if pos < len(buf) else 0x100
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    value, pos = _decode(buf, pos, 5)
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise VarintError(f"varint value {value} is outside int32")
    return value, pos


def decode_varlong(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Decode a zig-zag varlong at ``pos``: (value, position after it)."""
    b = buf[pos] if pos < len(buf) else 0x100
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    value, pos = _decode(buf, pos, 10)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise VarintError(f"varlong value {value} is outside int64")
    return value, pos
