"""Envelope (KIP-590): a Produce one broker sends on to the partition leader for a client
of its REST Proxy, authorised on the leader as that client, not as the sending broker.

Kafka's brokers forward admin requests to the controller this way; our REST Proxy
forwards the produce of partitions another broker leads (rest/forward.py). The sender
wraps the request (header and body) with the caller's principal and address; the leader
accepts an Envelope only on its inter-broker listener from a principal allowed
CLUSTER_ACTION on the cluster (as Kafka's handleEnvelope: CLUSTER_AUTHORIZATION_FAILED
otherwise), then runs the embedded request as the embedded principal, so its WRITE ACL is
what counts and the broker's own principal needs no WRITE. Only Produce is accepted
inside (INVALID_REQUEST otherwise): nothing else is forwarded this way.

The principal travels as its ``Type:name`` text in UTF-8 (Kafka's is its principal
builder's serde; only our brokers read it), the address as 4 or 16 bytes.
"""

from __future__ import annotations

import inspect
import ipaddress
import logging
from typing import TYPE_CHECKING, Any

from kafkaproto import ApiKey, ErrorCode, ProtocolError, RequestHeader, frames
from kafkaproto.codegen import Message
from kafkaproto.messages import EnvelopeRequest, EnvelopeResponse
from logserver import request_context
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.broker import Broker

log = logging.getLogger(__name__)

ENVELOPE_VERSION = 0
FORWARDABLE = frozenset({ApiKey.PRODUCE})


class EnvelopeRefused(Exception):
    """The leader did not run the embedded request (its error code says why)."""

    def __init__(self, error_code: int) -> None:
        super().__init__(ErrorCode(error_code).name)
        self.error_code = error_code


def wrap(api_key: int, version: int, body: Message, client_id: str | None) -> EnvelopeRequest:
    """The request as the current request's principal and client address send it."""
    frame = frames.encode_request(api_key, version, 0, client_id, body)
    host = request_context.client_host.get().lstrip("/")
    try:
        address = ipaddress.ip_address(host).packed
    except ValueError:
        address = b""
    return EnvelopeRequest(request_data=frame[4:],
                           request_principal=request_context.principal.get().encode(),
                           client_host_address=address)


def unwrap(api_key: int, version: int, answer: Message) -> Message:
    """The embedded response of an EnvelopeResponse; EnvelopeRefused if there is none."""
    if not isinstance(answer, EnvelopeResponse):
        raise EnvelopeRefused(ErrorCode.UNKNOWN_SERVER_ERROR)
    if answer.error_code != ErrorCode.NONE or answer.response_data is None:
        raise EnvelopeRefused(answer.error_code or ErrorCode.UNKNOWN_SERVER_ERROR)
    return frames.decode_response(api_key, version, answer.response_data)[1]


def handle(broker: Broker, header: RequestHeader, request: EnvelopeRequest) -> Any:
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
    from logserver.handlers import HANDLERS

    data = memoryview(bytearray(request.request_data))  # appends stamp offsets in place
    try:
        inner, offset = frames.decode_request_header(data)
        spec = HANDLERS.get(inner.api_key)
        if inner.api_key not in FORWARDABLE or spec is None:
            return EnvelopeResponse(error_code=ErrorCode.INVALID_REQUEST)
        if not spec.min_version <= inner.api_version <= spec.max_version:
            return EnvelopeResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
        body = frames.decode_request(inner, data, offset)
    except ProtocolError as exc:
        log.warning("Envelope with an undecodable request: %s", exc)
        return EnvelopeResponse(error_code=ErrorCode.INVALID_REQUEST)
    request_context.principal.set(principal)
    request_context.client_host.set(f"/{host}")
    request_context.listener_name.set("")  # not a broker's request any more
    result = spec.handle(broker, inner, body)

    async def answered() -> EnvelopeResponse:
        response = await result if inspect.isawaitable(result) else result
        if not isinstance(response, Message):  # acks=0 or a connection to close
            return EnvelopeResponse(error_code=ErrorCode.INVALID_REQUEST)
        chunks = frames.encode_response(inner.api_key, inner.api_version, inner.correlation_id,
                                 response)
        frame = b"".join(bytes(c) for c in chunks if isinstance(c, bytes))
        return EnvelopeResponse(response_data=frame[4:])
    return answered()
