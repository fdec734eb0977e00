"""MQTT wire primitives: variable byte integers, UTF-8 strings, binary data."""

from __future__ import annotations

import struct

from .errors import MalformedPacket

_U16 = struct.Struct(">H")

#: Variable byte integers below 16384 (one or two bytes), each encoded on first use: most
#: lengths. All 16,384 made at import were 0.7 MB in every bridge (issue 27).
_SMALL: list[bytes | None] = [None] * (1 << 14)


def encode_varint(n: int) -> bytes:
    """MQTT variable byte integer (1-4 bytes, little-endian groups of 7 bits)."""
    if n < 16384:
        enc = _SMALL[n]
        if enc is None:
            enc = _SMALL[n] = bytes((n,)) if n < 0x80 else bytes(((n & 0x7F) | 0x80, n >> 7))
        return enc
    if n > 268_435_455:
        raise ValueError(f"variable byte integer too large: {n}")
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def decode_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Decode a variable byte integer at ``pos``; at most 4 bytes, as the spec demands."""
    value = 0
    shift = 0
    for i in range(4):
        if pos + i >= len(buf):
            raise MalformedPacket("truncated variable byte integer")
        b = buf[pos + i]
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos + i + 1
        shift += 7
    raise MalformedPacket("variable byte integer longer than 4 bytes")


def read_u16(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    if pos + 2 > end:
        raise MalformedPacket("truncated two-byte integer")
    return _U16.unpack_from(buf, pos)[0], pos + 2


def read_binary(buf: bytes, pos: int, end: int) -> tuple[bytes, int]:
    n, pos = read_u16(buf, pos, end)
    if pos + n > end:
        raise MalformedPacket("truncated binary data")
    return bytes(buf[pos : pos + n]), pos + n


def read_utf8(buf: bytes, pos: int, end: int) -> tuple[str, int]:
    """A UTF-8 string; the spec forbids U+0000 (malformed) in every string."""
    raw, pos = read_binary(buf, pos, end)
    try:
        s = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedPacket("string is not valid UTF-8") from None
    if "\x00" in s:
        raise MalformedPacket("string contains U+0000")
    return s, pos


def write_binary(out: bytearray, data: bytes) -> None:
    if len(data) > 0xFFFF:
        raise ValueError("binary field longer than 65535 bytes")
    out.extend(_U16.pack(len(data)))
    out.extend(data)


def write_utf8(out: bytearray, s: str) -> None:
    write_binary(out, s.encode("utf-8"))
