"""Envelope (58): a request one broker sends on for a client, with the client's principal
and address, so the receiving broker authorises it as that client (KIP-590; Kafka
forwards admin requests to the controller with it, we forward REST Proxy produces to the
partition leader)."""

from __future__ import annotations

from ..schema import F
from ..spec import api

# fmt: off

ENVELOPE = api(
    58,
    "Envelope",
    "0",
    flexible="0+",
    request=(
        F("RequestData", "bytes", "0+"),  # the embedded request: header and body
        F("RequestPrincipal", "bytes", "0+", nullable="0+"),  # the client's, serialized
        F("ClientHostAddress", "bytes", "0+"),  # the client's IP address, 4 or 16 bytes
    ),
    response=(
        F("ResponseData", "bytes", "0+", nullable="0+", default=None),  # header and body
        F("ErrorCode", "int16", "0+"),
    ),
)

EnvelopeRequest = ENVELOPE.request
EnvelopeResponse = ENVELOPE.response
