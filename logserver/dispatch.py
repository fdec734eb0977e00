"""From a request frame to a handler: header, version checks, body decoding.

Whatever a client sends, the outcome is a response or a closed connection with a log line
that says why; never an exception that reaches the connection loop.
"""

from __future__ import annotations

import asyncio
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
from logserver.handlers import HANDLERS, UNADVERTISED_HANDLERS
from logserver.request_context import listener_name, principal, set_peer
from logserver.security.sasl import PasswordCheck
from logserver.security.session import ANONYMOUS, RAW_TOKEN, current_security

if TYPE_CHECKING:
    from logserver.config import Config
    from logserver.security.session import ConnectionSecurity
    from logserver.services import BrokerServices

log = logging.getLogger(__name__)

Outcome = tuple[RequestHeader | None, Any] | None


class Dispatcher:
    def __init__(self, broker: BrokerServices) -> None:
        self.broker = broker

    @property
    def config(self) -> Config:
        return self.broker.config

    def dispatch(self, frame: bytearray, peer: str,
                 security: ConnectionSecurity | None = None) -> Outcome:
        """Returns None (no response), (header, response-or-awaitable) or (None, why to close)."""
        if security is not None and security.expects_raw_token:
            return self._raw_token(bytes(frame), peer, security)
        view = memoryview(frame)
        try:
            header, offset = decode_request_header(view)
        except ProtocolError as exc:
            return None, f"malformed request header: {exc}"
        if security is not None:
            refused = security.refuses(header.api_key)
            if refused is not None:  # Kafka: IllegalSaslStateException, the connection closes
                return None, refused
        handler = HANDLERS.get(header.api_key) or UNADVERTISED_HANDLERS.get(header.api_key)
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
        principal.set(ANONYMOUS if security is None else security.principal)
        listener_name.set("" if security is None else security.listener_name)
        current_security.set(security)
        result: Any | Awaitable[Any] | None = handler.handle(self.broker, header, body)
        if result is None:
            return None
        return header, result

    def _raw_token(self, token: bytes, peer: str, security: ConnectionSecurity) -> Outcome:
        """A bare SASL token after a v0 SaslHandshake; a bare token answers it. A failure
        cannot be told in this framing: the connection is closed, as Kafka does."""
        from logserver.handlers.sasl_authenticate import outcome

        sasl = security.sasl(self.broker.scram)
        assert sasl is not None
        set_peer(peer)
        host = peer.rsplit(":", 1)[0]
        step = sasl.authenticate(token)
        if isinstance(step, PasswordCheck):
            async def checked(check: PasswordCheck = step) -> bytes:
                ok = await asyncio.to_thread(check.run)
                reply = sasl.password_checked(check, ok)
                outcome(self.broker, security, sasl, reply, host)
                return reply.token
            return RAW_TOKEN, checked()
        outcome(self.broker, security, sasl, step, host)
        if step.error_code != ErrorCode.NONE:
            return None, f"SASL authentication failed: {step.error_message}"
        return RAW_TOKEN, step.token


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
