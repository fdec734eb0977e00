"""SaslHandshake: choose the SASL mechanism of this connection.

On a listener without SASL, as in Kafka, the answer is ILLEGAL_SASL_STATE. An unsupported
mechanism gets UNSUPPORTED_SASL_MECHANISM and the enabled ones, then the connection closes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import SaslHandshakeRequest, SaslHandshakeResponse
from logserver.security.session import current_security

if TYPE_CHECKING:
    from logserver.broker import Broker


def handle(broker: Broker, header: RequestHeader,
           request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    security = current_security.get()
    sasl = None if security is None else security.sasl(broker.scram)
    if sasl is None:
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    error, mechanisms = sasl.handshake(request.mechanism, header.api_version)
    return SaslHandshakeResponse(error_code=error, mechanisms=mechanisms)
