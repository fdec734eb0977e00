"""Whole frames: request/response headers around the generated body codecs.

Sans-I/O: callers hand in the bytes of one frame (the 4-byte size prefix
already stripped on the way in) and get back objects; on the way out they get
the complete frame, size prefix included, as chunks ready for ``sendmsg`` /
``os.sendfile``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from .codegen import DECODE_FAILURES, ENCODE_FAILURES, Message
from .errors import DecodeError, EncodeError, UnknownApiKeyError
from .registry import API_SPECS
from .spec import ApiSpec
from .wire import FileRegion, skip_tagged_fields

__all__ = [
    "FileRegion",
    "RequestHeader",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_response",
]

_REQ_HEADER = struct.Struct(">hhi")
_SIZE_REQ_HEADER = struct.Struct(">ihhi")
_SIZE_CORR = struct.Struct(">ii")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")

Buffer = bytes | bytearray | memoryview


@dataclass(slots=True)
class RequestHeader:
    """Request header v1/v2 fields (the tag buffer of v2 carries nothing we use)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def _spec(api_key: int) -> ApiSpec:
    spec = API_SPECS.get(api_key)
    if spec is None:
        raise UnknownApiKeyError(api_key)
    return spec


def _view(frame: Buffer) -> memoryview:
    return frame if isinstance(frame, memoryview) else memoryview(frame)


def decode_request_header(frame: Buffer) -> tuple[RequestHeader, int]:
    """Parse the request header; returns it and the offset where the body starts.

    The v1 part (key, version, correlation id, int16-length client id) is read
    for every request, so the server can answer even unknown keys and
    versions. The v2 tag buffer is skipped only for flexible versions of
    declared APIs. Raises :class:`DecodeError` only if the v1 part is unreadable.
    """
    buf = _view(frame)
    blen = len(buf)
    try:
        api_key, api_version, correlation_id = _REQ_HEADER.unpack_from(buf, 0)
        n = _INT16.unpack_from(buf, 8)[0]
    except struct.error:
        raise DecodeError("truncated request header") from None
    pos = 10
    client_id: str | None
    if n < 0:
        if n != -1:
            raise DecodeError(f"negative client_id length {n}")
        client_id = None
    else:
        end = pos + n
        if end > blen:
            raise DecodeError("truncated client_id in request header")
        try:
            client_id = str(buf[pos:end], "utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError("client_id is not valid UTF-8") from exc
        pos = end
    header = RequestHeader(api_key, api_version, correlation_id, client_id)
    spec = API_SPECS.get(api_key)
    if spec is not None and spec.supports(api_version) and spec.is_flexible(api_version):
        try:
            pos = skip_tagged_fields(buf, pos)
        except DecodeError:
            # Keep the header usable for an error reply; the body decode that
            # follows starts past the end and fails with DecodeError.
            pos = blen
    return header, pos


def decode_request(header: RequestHeader, frame: Buffer, offset: int) -> Message:
    """Decode the request body that starts at ``offset``; trailing bytes are ignored.

    Records fields come back as memoryview slices of ``frame`` (no copy).
    """
    spec = _spec(header.api_key)
    cls = spec.request
    version = header.api_version
    dec = cls._decoders.get(version) or cls.decoder(version)
    try:
        return dec(_view(frame), offset)[0]
    except DecodeError:
        raise
    except DECODE_FAILURES as exc:
        raise DecodeError(f"{cls.__name__} v{version}: {exc}") from exc


def encode_response(
    api_key: int, api_version: int, correlation_id: int, body: Message
) -> list[bytes | FileRegion]:
    """The complete response frame (size prefix included) as send-ready chunks.

    Consecutive bytes are coalesced; every :class:`FileRegion` is its own chunk
    and its length counts in the size prefix. Header v0 for non-flexible
    versions and always for ApiVersions (KIP-511), v1 otherwise.
    """
    spec = _spec(api_key)
    cls = spec.response
    if body.__class__ is not cls:
        raise TypeError(f"expected {cls.__name__}, got {type(body).__name__}")
    enc = cls._encoders.get(api_version) or cls.encoder(api_version)
    out = bytearray(_SIZE_CORR.pack(0, correlation_id))
    if spec.response_header_version(api_version):
        out.append(0)
    chunks: list[Any] = []
    try:
        out = enc(body, out, chunks)
    except ENCODE_FAILURES as exc:
        raise EncodeError(f"{cls.__name__} v{api_version}: {exc}") from exc
    if not chunks:
        _INT32.pack_into(out, 0, len(out) - 4)
        return [bytes(out)]
    chunks.append(out)
    total = -4
    for c in chunks:
        total += c.length if isinstance(c, FileRegion) else len(c)
    try:
        _INT32.pack_into(chunks[0], 0, total)
    except struct.error as exc:
        raise EncodeError(f"response frame too large: {total} bytes") from exc
    return [
        c if isinstance(c, FileRegion) else bytes(c)
        for c in chunks
        if isinstance(c, FileRegion) or len(c)
    ]


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Message
) -> bytes:
    """A complete request frame, size prefix included (client side: bridge, tests, benchmarks)."""
    spec = _spec(api_key)
    cls = spec.request
    if body.__class__ is not cls:
        raise TypeError(f"expected {cls.__name__}, got {type(body).__name__}")
    enc = cls._encoders.get(api_version) or cls.encoder(api_version)
    out = bytearray(_SIZE_REQ_HEADER.pack(0, api_key, api_version, correlation_id))
    if client_id is None:
        out += b"\xff\xff"
    else:
        raw = client_id.encode()
        if len(raw) > 0x7FFF:
            raise EncodeError("client_id longer than 32767 bytes")
        out += _INT16.pack(len(raw))
        out += raw
    if spec.request_header_version(api_version) == 2:
        out.append(0)
    chunks: list[Any] = []
    try:
        out = enc(body, out, chunks)
    except ENCODE_FAILURES as exc:
        raise EncodeError(f"{cls.__name__} v{api_version}: {exc}") from exc
    if chunks:
        raise EncodeError("FileRegion values are only supported in responses")
    _INT32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def decode_response(api_key: int, api_version: int, frame: Buffer) -> tuple[int, Message]:
    """Decode a response frame (size prefix stripped); returns ``(correlation_id, body)``."""
    spec = _spec(api_key)
    cls = spec.response
    dec = cls._decoders.get(api_version) or cls.decoder(api_version)
    buf = _view(frame)
    try:
        correlation_id = _INT32.unpack_from(buf, 0)[0]
        pos = 4
        if spec.response_header_version(api_version):
            pos = skip_tagged_fields(buf, pos)
        return correlation_id, dec(buf, pos)[0]
    except DecodeError:
        raise
    except DECODE_FAILURES as exc:
        raise DecodeError(f"{cls.__name__} v{api_version}: {exc}") from exc
