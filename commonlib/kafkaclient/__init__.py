"""The project's two Kafka clients, both on the sans-I/O core ``kafkaproto.client``.

- :class:`AsyncConnection` (asyncio, pipelined) and :class:`KafkaClient` (a cluster's
  metadata and connections on top of it): the MQTT bridge, and the broker's requests to
  its peers (replica fetchers, transaction markers, admin and REST calls).
- :class:`BlockingConnection` (plain sockets): the admin command line, tests and
  benchmarks.

Retry loops around them back off with ``kafkaproto.client.Backoff`` (re-exported here).
Here so that both programs can use them: neither ``logserver`` nor ``mqtt_bridge``
imports the other.
"""

from __future__ import annotations

from kafkaproto.client import (
    Backoff,
    Failures,
    KafkaConnectionError,
    KafkaError,
    RetryDecision,
    RetryPolicy,
)

from .address import parse_bootstrap, parse_hostport
from .async_client import KafkaClient, TopicMeta, TopicPartition
from .async_connection import AsyncConnection, ResponseCallback
from .blocking import BlockingConnection

__all__ = [
    "AsyncConnection",
    "Backoff",
    "BlockingConnection",
    "Failures",
    "KafkaClient",
    "KafkaConnectionError",
    "KafkaError",
    "ResponseCallback",
    "RetryDecision",
    "RetryPolicy",
    "TopicMeta",
    "TopicPartition",
    "parse_bootstrap",
    "parse_hostport",
]
