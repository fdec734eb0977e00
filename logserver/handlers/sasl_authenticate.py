"""SaslAuthenticate (KIP-152): one SASL token of the exchange chosen by SaslHandshake.

A PLAIN password is checked on a worker thread (PBKDF2 against the stored SCRAM hash),
never on the event loop. Failures get SASL_AUTHENTICATION_FAILED with Kafka's message
and the connection is closed after the reply; they are logged as Kafka logs them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import SaslAuthenticateRequest, SaslAuthenticateResponse
from logserver.request_context import client_host
from logserver.security.sasl import PasswordCheck, SaslAuthenticator, SaslReply
from logserver.security.session import ConnectionSecurity, current_security

if TYPE_CHECKING:
    from logserver.services import BrokerServices

log = logging.getLogger(__name__)


def handle(broker: BrokerServices, header: RequestHeader, request: SaslAuthenticateRequest) -> (
        SaslAuthenticateResponse | Awaitable[SaslAuthenticateResponse]):
    security = current_security.get()
    sasl = None if security is None else security.sasl(broker.scram)
    if security is None or sasl is None or sasl.legacy_tokens:
        return SaslAuthenticateResponse(
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
            error_message="SaslAuthenticate is not expected on this connection", auth_bytes=b"")
    delay_ms: int = broker.config["connection.failed.authentication.delay.ms"]
    step = sasl.authenticate(bytes(request.auth_bytes))
    if isinstance(step, PasswordCheck):
        return _checked(broker, security, sasl, step, client_host.get(), delay_ms)
    response = _respond(broker, security, sasl, step, client_host.get())
    if response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and delay_ms > 0:
        return _delayed(response, delay_ms)
    return response


async def _checked(broker: BrokerServices, security: ConnectionSecurity, sasl: SaslAuthenticator,
                   check: PasswordCheck, host: str, delay_ms: int) -> SaslAuthenticateResponse:
    ok = await asyncio.to_thread(check.run)
    response = _respond(broker, security, sasl, sasl.password_checked(check, ok), host)
    if not ok and delay_ms > 0:
        await asyncio.sleep(delay_ms / 1000)
    return response


async def _delayed(response: SaslAuthenticateResponse, delay_ms: int) -> SaslAuthenticateResponse:
    """KIP-306: a failed authentication is answered after connection.failed.authentication.
    delay.ms (and the connection then closed), so guessing passwords is slow."""
    await asyncio.sleep(delay_ms / 1000)
    return response


def _respond(broker: BrokerServices, security: ConnectionSecurity, sasl: SaslAuthenticator,
             reply: SaslReply, host: str) -> SaslAuthenticateResponse:
    outcome(broker, security, sasl, reply, host)
    return SaslAuthenticateResponse(error_code=reply.error_code, error_message=reply.error_message,
                                    auth_bytes=reply.token, session_lifetime_ms=0)


def outcome(broker: BrokerServices, security: ConnectionSecurity, sasl: SaslAuthenticator,
            reply: SaslReply, host: str) -> None:
    """Authenticate the connection on success; log a failure (Kafka: INFO, with the peer)
    and count it against the address (its next login waits: SaslHandshake)."""
    security.settle()
    if reply.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED:
        # the wait runs from when the (KIP-306 delayed) failure reply leaves
        reply_delay_s = broker.config["connection.failed.authentication.delay.ms"] / 1000
        broker.login_backoff.failed(host, time.monotonic() + reply_delay_s)
        broker.sasl_failures[security.listener_name] += 1
        log.info("Failed authentication with %s (%s) on listener %s", host, reply.error_message,
                 security.listener_name)
    elif sasl.complete and reply.error_code == ErrorCode.NONE:
        broker.login_backoff.succeeded(host)
        log.debug("%s authenticated as %s with %s", host, security.principal, sasl.mechanism)
