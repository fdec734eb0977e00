"""From a request frame to a handler: header, version checks, body decoding.

Whatever a client sends, the outcome is a response or a closed connection with a log line
that says why; never an exception that reaches the connection loop.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from kafkaproto import (
    ApiKey,
    ErrorCode,
    ProtocolError,
    RequestHeader,
    decode_request,
    decode_request_header,
)
from kafkaproto.messages import ApiVersionsResponse
from logserver.handlers import HANDLERS
from logserver.request_context import set_peer

if TYPE_CHECKING:
    from logserver.broker import Broker
    from logserver.config import Config

log = logging.getLogger(__name__)

Outcome = tuple[RequestHeader | None, Any] | None


class Dispatcher:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    @property
    def config(self) -> Config:
        return self.broker.config

    def dispatch(self, frame: bytearray, peer: str) -> Outcome:
        """Returns None (no response), (header, response-or-awaitable) or (None, why to close)."""
        view = memoryview(frame)
        try:
            header, offset = decode_request_header(view)
        except ProtocolError as exc:
            return None, f"malformed request header: {exc}"
        handler = HANDLERS.get(header.api_key)
        if handler is None and self.broker.cluster is not None:
            handler = cluster_extra_handlers().get(header.api_key)
        if handler is None:
            return None, (f"unsupported API key {header.api_key} "
                          f"(client {header.client_id!r}, correlation id {header.correlation_id})")
        name = handler.name
        if not handler.min_version <= header.api_version <= handler.max_version:
            if header.api_key == ApiKey.API_VERSIONS:
                return _api_versions_downgrade(header)
            return None, (f"unsupported version {header.api_version} of {name} "
                          f"(supported {handler.min_version}-{handler.max_version}, "
                          f"client {header.client_id!r})")
        try:
            body = decode_request(header, view, offset)
        except ProtocolError as exc:
            return None, f"malformed {name} v{header.api_version} request from {header.client_id!r}: {exc}"
        set_peer(peer)
        handle = handler.handle
        if self.broker.cluster is not None:  # cluster mode serves some APIs its own way
            handle = cluster_handlers().get(header.api_key, handle)
        result: Any | Awaitable[Any] | None = handle(self.broker, header, body)
        if result is None:
            return None
        return header, result


def cluster_handlers() -> dict[int, Any]:
    from logserver.cluster.handlers import HANDLERS as CLUSTER_HANDLERS

    return CLUSTER_HANDLERS


def cluster_extra_handlers() -> dict[int, Any]:
    from logserver.cluster.handlers import EXTRA_HANDLERS

    return EXTRA_HANDLERS


def _api_versions_downgrade(header: RequestHeader) -> Outcome:
    """KIP-511: answer a too-new ApiVersions with a v0 body naming the versions we have."""
    api_versions = HANDLERS[ApiKey.API_VERSIONS]
    response = ApiVersionsResponse(
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=[ApiVersionsResponse.ApiVersion(
            api_key=ApiKey.API_VERSIONS,
            min_version=api_versions.min_version,
            max_version=api_versions.max_version)],
    )
    v0 = RequestHeader(header.api_key, 0, header.correlation_id, header.client_id)
    return v0, response
