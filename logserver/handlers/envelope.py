"""Envelope (KIP-590), the leader's side: a Produce another broker's REST Proxy forwards,
run as the REST caller it names (logserver/cluster/envelope.py wraps it).

Accepted only on the inter-broker listener from a principal allowed CLUSTER_ACTION on the
cluster (as Kafka's handleEnvelope: CLUSTER_AUTHORIZATION_FAILED otherwise); then the
embedded request runs as the embedded principal, so its WRITE ACL is what counts. Only
Produce is accepted inside (INVALID_REQUEST otherwise): nothing else is forwarded.
"""

from __future__ import annotations

import inspect
import ipaddress
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafkaproto import ApiKey, ErrorCode, ProtocolError, RequestHeader, frames
from kafkaproto.codegen import Message
from kafkaproto.messages import EnvelopeRequest, EnvelopeResponse
from logserver import request_context
from logserver.handlers.produce import handle as handle_produce
from logserver.handlers.versions import ADVERTISED
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.services import BrokerServices

log = logging.getLogger(__name__)

# What may travel inside an Envelope, and the handler that runs it.
FORWARDABLE: dict[int, Callable[..., Any]] = {ApiKey.PRODUCE: handle_produce}


def handle(broker: BrokerServices, header: RequestHeader, request: EnvelopeRequest) -> Any:
    """The leader's side: check the sender, then run the embedded request as its client."""
    if not checks.from_broker(broker):
        log.warning("Envelope from %s (%s) refused: not a broker on the inter-broker listener",
                    request_context.principal.get(), request_context.client_host.get())
        return EnvelopeResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    try:
        principal = bytes(request.request_principal or b"").decode()
        host = str(ipaddress.ip_address(bytes(request.client_host_address)))
    except ValueError:
        return EnvelopeResponse(error_code=ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE)
    if ":" not in principal:
        return EnvelopeResponse(error_code=ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE)
    data = memoryview(bytearray(request.request_data))  # appends stamp offsets in place
    try:
        inner, offset = frames.decode_request_header(data)
        handler = FORWARDABLE.get(inner.api_key)
        if handler is None:
            return EnvelopeResponse(error_code=ErrorCode.INVALID_REQUEST)
        served = ADVERTISED[inner.api_key]
        if not served.min_version <= inner.api_version <= served.max_version:
            return EnvelopeResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
        body = frames.decode_request(inner, data, offset)
    except ProtocolError as exc:
        log.warning("Envelope with an undecodable request: %s", exc)
        return EnvelopeResponse(error_code=ErrorCode.INVALID_REQUEST)
    request_context.principal.set(principal)
    request_context.client_host.set(f"/{host}")
    request_context.listener_name.set("")  # not a broker's request any more
    result = handler(broker, inner, body)

    async def answered() -> EnvelopeResponse:
        response = await result if inspect.isawaitable(result) else result
        if not isinstance(response, Message):  # acks=0 or a connection to close
            return EnvelopeResponse(error_code=ErrorCode.INVALID_REQUEST)
        chunks = frames.encode_response(inner.api_key, inner.api_version, inner.correlation_id,
                                 response)
        frame = b"".join(bytes(c) for c in chunks if isinstance(c, bytes))
        return EnvelopeResponse(response_data=frame[4:])
    return answered()
