"""SaslHandshake: choose the SASL mechanism of this connection.

On a listener without SASL, as in Kafka, the answer is ILLEGAL_SASL_STATE. An unsupported
mechanism gets UNSUPPORTED_SASL_MECHANISM and the enabled ones, then the connection closes.
A login from an address whose logins just failed starts late: the handshake is answered
after that address's wait (``connection.failed.authentication.delay.*``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import SaslHandshakeRequest, SaslHandshakeResponse
from logserver.request_context import client_host
from logserver.security.session import current_security

if TYPE_CHECKING:
    from logserver.services import BrokerServices


def handle(broker: BrokerServices, header: RequestHeader, request: SaslHandshakeRequest) -> (
        SaslHandshakeResponse | Awaitable[SaslHandshakeResponse]):
    security = current_security.get()
    sasl = None if security is None else security.sasl(broker.scram)
    if sasl is None:
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    error, mechanisms = sasl.handshake(request.mechanism, header.api_version)
    response = SaslHandshakeResponse(error_code=error, mechanisms=mechanisms)
    wait = broker.login_backoff.wait(client_host.get(), time.monotonic())
    return _after(wait, response) if wait > 0 else response


async def _after(wait: float, response: SaslHandshakeResponse) -> SaslHandshakeResponse:
    """The login starts once its address's wait after failed logins is over."""
    await asyncio.sleep(wait)
    return response
