"""The sans-I/O core of a Kafka client: the bridge, benchmarks and tests add only the I/O.

- :class:`ClientConnection`: correlation ids, response framing, responses matched to
  their requests in order, the versions negotiated from an ApiVersions response.
- :class:`ApiVersionTable`: version negotiation (min of both maxima, at least both minima).
- :class:`RetryPolicy`: retry or give up, backoff, metadata refresh, from Kafka's
  retriable-error table (:data:`kafkaproto.errors.RETRY`).
"""

from __future__ import annotations

from .connection import ClientConnection, InFlight, Response, UnexpectedResponseError
from .errors import KafkaConnectionError, KafkaError
from .retry import RetryDecision, RetryPolicy
from .versions import ApiVersionTable

__all__ = [
    "ApiVersionTable",
    "ClientConnection",
    "InFlight",
    "KafkaConnectionError",
    "KafkaError",
    "Response",
    "RetryDecision",
    "RetryPolicy",
    "UnexpectedResponseError",
]
