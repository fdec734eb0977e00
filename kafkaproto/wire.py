"""Wire-level helpers shared by the generated codecs.

Only the rare paths live here as functions (multi-byte varints, skipping
unknown tag buffers); the common one-byte cases are inlined by the code
generator so the hot loops do not pay a call per field.
"""

from __future__ import annotations

from .errors import DecodeError

__all__ = [
    "FileRegion",
    "encode_uvarint",
    "read_uvarint",
    "read_uvarint_slow",
    "skip_tagged_fields",
]


class FileRegion:
    """Record bytes a response refers to instead of holding: the encoder writes only
    their length prefix and emits the region as a chunk of its own.

    The codec needs nothing but ``length``; where the bytes live and how they leave
    (e.g. sendfile from a log segment) is up to the subclass and whoever sends the
    frame. That sender calls ``release()`` exactly once, when the bytes were sent or
    will never be (connection gone, response dropped), so the owner can let go of
    whatever keeps them readable.
    """

    __slots__ = ()

    length: int  # the subclass provides it (a slot or a property)

    def release(self) -> None:
        """The sender is done with the bytes; the default region holds nothing."""


_ONE_BYTE: tuple[bytes, ...] = tuple(bytes((i,)) for i in range(128))


def encode_uvarint(value: int) -> bytes:
    """Unsigned varint (LEB128), as Kafka's ``ByteUtils.writeUnsignedVarint``.

    Unrolled for up to three bytes: record-set lengths in flexible Produce and
    Fetch messages take this path once per partition.
    """
    if value < 0x80:
        if value < 0:
            raise ValueError(f"unsigned varint cannot be negative: {value}")
        return _ONE_BYTE[value]
    if value < 0x4000:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    if value < 0x200000:
        return bytes(((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80, value >> 14))
    if value > 0xFFFFFFFF:
        raise ValueError(f"unsigned varint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_uvarint_slow(buf: memoryview, pos: int, first: int) -> tuple[int, int]:
    """Finish an unsigned varint whose first byte (``first``, at ``pos - 1``) had the high bit set.

    Unrolled (2-3 byte varints are every record-set length); Kafka allows at
    most 5 bytes, longer encodings are malformed.
    """
    try:
        b = buf[pos]
        result = (first & 0x7F) | ((b & 0x7F) << 7)
        if b < 0x80:
            return result, pos + 1
        b = buf[pos + 1]
        result |= (b & 0x7F) << 14
        if b < 0x80:
            return result, pos + 2
        b = buf[pos + 2]
        result |= (b & 0x7F) << 21
        if b < 0x80:
            return result, pos + 3
        b = buf[pos + 3]
        result |= (b & 0x7F) << 28
        if b < 0x80:
            return result, pos + 4
    except IndexError:
        raise DecodeError("truncated varint") from None
    raise DecodeError("varint longer than 5 bytes")


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    """Read an unsigned varint at ``pos``; returns ``(value, new_pos)``."""
    try:
        b = buf[pos]
    except IndexError:
        raise DecodeError("truncated varint") from None
    if b & 0x80:
        return read_uvarint_slow(buf, pos + 1, b)
    return b, pos + 1


def skip_tagged_fields(buf: memoryview, pos: int) -> int:
    """Skip a whole tag buffer (count, then tag/size/data triples); returns the new position."""
    count, pos = read_uvarint(buf, pos)
    end = len(buf)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > end:
            raise DecodeError("tagged field runs past the end of the frame")
    return pos
