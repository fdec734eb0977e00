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

The sending side (wrap/unwrap) is here; the leader's side is the Envelope handler
(logserver/handlers/envelope.py).
"""

from __future__ import annotations

import ipaddress

from kafkaproto import ErrorCode, frames
from kafkaproto.codegen import Message
from kafkaproto.messages import EnvelopeRequest, EnvelopeResponse
from logserver import request_context

ENVELOPE_VERSION = 0


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
