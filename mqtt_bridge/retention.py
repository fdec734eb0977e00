"""Retained messages: the in-memory store (bounded) and the compacted topic behind it.

One component for the three places that retain: a client's retained PUBLISH (uplink),
a downlink rule with ``retain`` (downlink) and the compacted topic read at start and
followed after (other bridges' retained messages). A message the limits refuse is
counted and logged here, once for all of them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from commonlib.kafkaclient import KafkaClient
from kafkaproto.records import Record

from .config import BridgeConfig
from .kafka_producer import Producer
from .retained_log import RetainedLog
from .session import OutMessage
from .stats import Stats
from .subscriptions import RetainedStore

log = logging.getLogger(__name__)


class Retention:
    """Retained messages by topic; what a new subscription is sent first."""

    def __init__(self, config: BridgeConfig, stats: Stats, client: KafkaClient, producer: Producer) -> None:
        self._config = config
        self._stats = stats
        self.store = RetainedStore(config.max_retained_messages, config.max_retained_bytes)
        self.log = RetainedLog(client, producer, config.retained_topic, self.apply,
                               config.max_packet_size + 65536)

    async def create(self) -> None:
        await self.log.create()

    async def load(self) -> None:
        await self.log.load()

    def on_records(self, records: list[Record]) -> None:
        """Records of the retained topic (this and other bridges' retained messages)."""
        self.log.on_records(records)

    def apply(
        self, topic: str, payload: bytes | None, props: dict[str, Any] | None, timestamp_ms: int = -1,
        qos: int = 2,
    ) -> None:
        """A retained message (or its removal: no payload) from the log or a client."""
        if not payload:
            self.store.set(topic, None)
            return
        msg = OutMessage(topic, payload, props)
        if msg.expires_at is not None and props and timestamp_ms >= 0:
            msg.expires_at = timestamp_ms / 1000 + props["message_expiry_interval"]
        self.keep(topic, msg, qos)

    def keep(self, topic: str, msg: OutMessage, qos: int) -> bool:
        """Store a retained message if the limits allow; else count and log the refusal."""
        if self.store.set(topic, msg, qos):
            return True
        self.refused(topic)
        return False

    def clear(self, topic: str) -> None:
        self.store.set(topic, None)

    def fits(self, topic: str, payload: bytes) -> bool:
        return self.store.fits(topic, payload)

    def refused(self, topic: str) -> None:
        self._stats.retained_refused += 1
        n = self._stats.retained_refused
        if n <= 5 or n % 1000 == 0:
            log.warning(
                "retained message on %r not kept: limit of %d messages / %d bytes reached (%d refused so far)",
                topic, self._config.max_retained_messages, self._config.max_retained_bytes, n,
                extra={"event": "retained_refused", "topic": topic},
            )

    def retain(self, topic: str, payload: bytes, props: dict[str, Any] | None, qos: int) -> None:
        """A retained PUBLISH from a client: in memory now, in the compacted topic for good."""
        self.apply(topic, payload, props, -1, qos)
        self.log.write(topic, payload, props, qos)

    def matching(self, topic_filter: str) -> Iterator[tuple[OutMessage, int]]:
        return self.store.matching(topic_filter)

    @property
    def count(self) -> int:
        return len(self.store.messages)

    @property
    def bytes(self) -> int:
        return self.store.bytes
