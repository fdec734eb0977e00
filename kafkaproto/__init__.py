"""Sans-I/O Kafka wire protocol: bytes in, typed objects out, and back.

Messages are declared once as data (:mod:`kafkaproto.messages`); per-version
encoders and decoders are generated from those declarations on first use
(:mod:`kafkaproto.codegen`). No sockets, no asyncio, no files here.
"""

from __future__ import annotations

from .api_keys import ApiKey
from .codegen import Message, Struct
from .errors import (
    DecodeError,
    EncodeError,
    ErrorCode,
    ProtocolError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)
from .frames import (
    RequestHeader,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)
from .registry import API_SPECS, precompile
from .spec import ApiSpec
from .wire import FileRegion

__all__ = [
    "API_SPECS",
    "ApiKey",
    "ApiSpec",
    "DecodeError",
    "EncodeError",
    "ErrorCode",
    "FileRegion",
    "Message",
    "ProtocolError",
    "RequestHeader",
    "Struct",
    "UnknownApiKeyError",
    "UnsupportedVersionError",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_response",
    "precompile",
]
