"""The sans-I/O core of a Kafka client: the bridge, benchmarks and tests add only the I/O.

- :class:`ClientConnection`: correlation ids, response framing, responses matched to
  their requests in order, the versions negotiated from an ApiVersions response.
- :class:`ApiVersionTable`: version negotiation (min of both maxima, at least both minima).
- :class:`RetryPolicy`: retry or give up, backoff, metadata refresh, from Kafka's
  retriable-error table (:data:`kafkaproto.errors.RETRY`).
- :class:`Backoff`: the one backoff policy of every retry loop (exponential from
  ``retry.backoff.ms`` to ``retry.backoff.max.ms``, with jitter); :class:`Failures`
  counts one loop's failures in a row under it.

The I/O around this core (one asyncio client, one blocking client) is
:mod:`commonlib.kafkaclient`.
"""

from __future__ import annotations

from .backoff import Backoff, Failures
from .connection import ClientConnection, InFlight, Response, UnexpectedResponseError
from .errors import KafkaConnectionError, KafkaError
from .retry import RetryDecision, RetryPolicy
from .versions import ApiVersionTable

__all__ = [
    "ApiVersionTable",
    "Backoff",
    "Failures",
    "ClientConnection",
    "InFlight",
    "KafkaConnectionError",
    "KafkaError",
    "Response",
    "RetryDecision",
    "RetryPolicy",
    "UnexpectedResponseError",
]
