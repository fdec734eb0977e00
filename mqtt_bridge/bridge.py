"""The bridge: MQTT sessions on one side, the log (Kafka protocol) on the other.

This module builds the components and runs their life cycle (docs/architecture.md,
"The MQTT bridge's components"); each does one job behind a narrow interface:

- ``listeners``: TCP, TLS and WebSocket listeners, each handing a transport to a new
  ``connection.Connection`` (MQTT packets in and out, one per device);
- ``sessions``: CONNECT (with ``access``: logins and ACLs), claims and takeovers in the
  session store, disconnect, expiry; ``persistence`` saves persistent sessions' state;
- ``uplink``: PUBLISH to the log or to local subscribers, QoS 2, wills;
  ``retention``: retained messages;
- ``downlink``: the log's records to the subscribed sessions, and catch-up for a
  persistent session that was away.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import Any

from commonlib.kafkaclient import Backoff, Failures, KafkaClient, KafkaError, TopicPartition
from kafkaproto.records import Record

from .access import Access
from .compacted import ensure_compacted_topic
from .config import BridgeConfig
from .connection import Connection, ConnectionContext, FlushQueue
from .downlink import Downlink
from .kafka_fetcher import Fetcher
from .kafka_producer import Producer
from .latency import puback_histogram
from .listeners import Listeners
from .mapping import Mapping
from .persistence import SessionPersistence
from .retention import Retention
from .session_store import TopicSessionStore, choose_store
from .sessions import SessionManager
from .stats import Stats
from .subscriptions import SubscriptionIndex
from .tls import server_context
from .uplink import Uplink

log = logging.getLogger(__name__)

#: The client id of the bridge's Kafka requests (in the brokers' logs and request metrics).
CLIENT_ID = "mqtt-bridge"
#: Startup steps (topics, retained messages, the session store) wait for the log with
#: Kafka's retry.backoff.ms / retry.backoff.max.ms.
STARTUP_BACKOFF = Backoff(100, 1000)

#: batch size of the session/retained producer: a batch closes at this size, so it stays
#: below one state (``--max-session-bytes``) or retained message plus 64 KiB, the
#: max.message.bytes headroom the compacted topics are created with
STATE_BATCH_BYTES = 32 * 1024


class Bridge:
    """Owns the Kafka client, producers and fetcher, and wires the components to them."""

    def __init__(self, config: BridgeConfig) -> None:
        self.config = config
        self.mapping = Mapping.parse(config.uplink, config.downlink)
        self.stats = Stats()
        #: PUBLISH (QoS 1/2) received -> its PUBACK/PUBREC written (the log write between)
        self.puback_latency = puback_histogram()
        self._tasks: set[asyncio.Task[Any]] = set()
        self.access = Access(config, self.mapping, self.stats)
        ssl_context = (
            server_context(config.tls_certfile, config.tls_keyfile, config.tls_cafile,
                           config.require_certificate)
            if config.tls_certfile else None
        )
        self.client = KafkaClient(config.bootstrap_servers, client_id=CLIENT_ID)
        self.producer = Producer(
            self.client,
            linger_ms=config.linger_ms,
            batch_bytes=config.batch_bytes,
            buffer_bytes=config.producer_buffer_bytes,
            delivery_timeout_s=config.delivery_timeout_s,
        )
        #: the topic store's records are followed too, so bridges see each other's sessions
        self._follow_sessions = config.session_store != "group"
        self.bridge_id = config.bridge_id or f"{socket.gethostname()}:{config.port}"
        #: session states and retained messages go through a producer of their own, with
        #: batches that fit the compacted topics' max.message.bytes: during a log outage the
        #: saves pile up, and a 1 MiB batch of them was refused (MESSAGE_TOO_LARGE); a failure
        #: there also never resets the uplink producer's idempotence (producer id, sequences)
        self.state_producer = Producer(
            self.client, linger_ms=config.linger_ms, batch_bytes=STATE_BATCH_BYTES,
            delivery_timeout_s=config.delivery_timeout_s,
        )
        self.fetcher = Fetcher(
            self.client,
            [r.kafka_topic for r in self.mapping.downlink] + [config.retained_topic]
            + ([config.session_topic] if self._follow_sessions else []),
            self.on_records,
        )
        self.index = SubscriptionIndex()
        self.retention = Retention(config, self.stats, self.client, self.state_producer)
        self.persistence = SessionPersistence(config, self.stats, self.fetcher, self.track)
        self.uplink = Uplink(config, self.mapping, self.stats, self.client, self.producer, self.fetcher,
                             self.retention, self.index, self.persistence)
        self.downlink = Downlink(self.mapping, self.stats, self.fetcher, self.retention, self.index,
                                 self.track)
        self.sessions = SessionManager(config, self.stats, self.access, self.persistence, self.uplink,
                                       self.downlink, self.retention, self.index, self.fetcher, self.track)
        self._context = ConnectionContext(
            config, self.stats, FlushQueue(), self.puback_latency, self.track,
            self.sessions, self.access, self.uplink,
        )
        self.listeners = Listeners(config, self._new_connection, self._refused, ssl_context)

    def _new_connection(self, tls: bool) -> Connection:
        return Connection(self._context, tls=tls)

    def _refused(self) -> None:
        self.stats.refused += 1

    @property
    def port(self) -> int:
        return self.listeners.port

    @property
    def tls_port(self) -> int:
        return self.listeners.tls_port

    # ---- life cycle -----------------------------------------------------------------
    async def start(self) -> None:
        cfg = self.config
        self.producer.start()
        self.state_producer.start()
        await self._retrying("retained topic", self.retention.create)
        if self._follow_sessions:  # compacted before the fetcher's metadata could auto-create it
            await self._retrying("session topic", lambda: ensure_compacted_topic(
                self.client, cfg.session_topic, 8, cfg.max_session_bytes + 65536))
        self.fetcher.start()
        await self.fetcher.ready.wait()
        await self._retrying("retained messages", self.retention.load)
        followed = [tp for tp in self.fetcher.positions
                    if tp[0] not in (cfg.retained_topic, cfg.session_topic)]
        anchor = min(followed) if followed else ("commands", 0)
        failures = Failures(STARTUP_BACKOFF)
        while True:
            try:
                store = await choose_store(
                    cfg.session_store,
                    self.client,
                    self.state_producer,
                    topic=cfg.session_topic,
                    group_prefix=cfg.group_prefix,
                    anchor=anchor,
                    max_bytes=cfg.max_session_bytes,
                    bridge_id=self.bridge_id,
                    takeover_timeout_s=cfg.takeover_timeout_s,
                )
                self.persistence.store = store
                if isinstance(store, TopicSessionStore):
                    store.on_taken = self.sessions.surrender
                    store.follower = self.fetcher
                break
            except KafkaError as exc:
                delay = failures.failed()
                log.warning("session store not ready (%s); retrying in %.1f s", exc, delay)
                await asyncio.sleep(delay)
        await self.listeners.start()
        loop = asyncio.get_running_loop()
        for coro in (self.sessions.housekeeping(), self.persistence.commit_loop(), self._stats_loop()):
            self.track(loop.create_task(coro))
        log.info(
            "mqtt-bridge listening on %s:%d, log at %s",
            cfg.host, self.port or self.tls_port, cfg.bootstrap_servers,
            extra={"event": "listening", "port": self.port or self.tls_port},
        )

    async def _retrying(self, what: str, step: Callable[[], Awaitable[Any]]) -> None:
        failures = Failures(STARTUP_BACKOFF)
        while True:
            try:
                await step()
                return
            except KafkaError as exc:
                delay = failures.failed()
                log.warning("%s not ready (%s); retrying in %.1f s", what, exc, delay)
                await asyncio.sleep(delay)

    async def stop(self) -> None:
        """Stop accepting, tell clients, save persistent sessions, flush the producer."""
        self.sessions.stop_admitting()
        self.listeners.close()
        self.sessions.close_all()
        await asyncio.sleep(0)
        self.sessions.detach_all()
        await self.listeners.stop()
        await self.persistence.save_sessions(all_persistent=True)
        with contextlib.suppress(Exception):
            await self.producer.close(timeout=5)
        with contextlib.suppress(Exception):
            await self.state_producer.close(timeout=5)
        await self.fetcher.stop()
        for t in list(self._tasks):
            t.cancel()
        await self.client.close()
        log.info("mqtt-bridge stopped", extra={"event": "stopped"})

    def track(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task failed", exc_info=task.exception())

    def on_records(self, tp: TopicPartition, records: list[Record]) -> None:
        """The fetcher's callback: downlink records, retained messages, session states."""
        topic = tp[0]
        if topic in self.mapping.by_kafka_topic:
            self.downlink.on_records(tp, records)
        elif topic == self.config.retained_topic:
            self.retention.on_records(records)
        elif topic == self.config.session_topic:
            store = self.persistence.store
            if isinstance(store, TopicSessionStore):
                store.on_records(records)

    # ---- monitoring ----------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        s = self.stats
        sessions = self.persistence.sessions
        return {
            "connections": len(self.sessions.connections),
            "sessions": len(sessions),
            "subscriptions": self.index.count,
            "connections_total": s.connections_total,
            "refused": s.refused,
            "protocol_errors": s.protocol_errors,
            "msgs_in": s.msgs_in,
            "msgs_out": s.msgs_out,
            "bytes_in": s.bytes_in,
            "bytes_out": s.bytes_out,
            "uplink_records": s.uplink_records,
            "uplink_acked": self.producer.records_acked,
            "produce_requests": self.producer.requests_sent,
            "downlink_records": s.downlink_records,
            "local_routed": s.local_routed,
            "denied_connect": s.denied_connect,
            "denied_publish": s.denied_publish,
            "denied_subscribe": s.denied_subscribe,
            "session_save_failures": s.session_save_failures,
            "refused_sessions": s.refused_sessions,
            "retained_messages": self.retention.count,
            "retained_bytes": self.retention.bytes,
            "retained_refused": s.retained_refused,
            "topic_levels_refused": s.topic_levels_refused,
            "sessions_taken_over": s.sessions_taken_over,
            "tls_handshake_failures": sum(self.listeners.tls_failures.counts.values()),
            "login_failures": self.access.login_failures,
            "logins_delayed": self.access.logins_delayed,
            "early_overflows": s.early_overflows,
            "queued_dropped": s.queued_dropped + sum(x.dropped for x in sessions.values()),
        }

    async def _stats_loop(self) -> None:
        interval = self.config.stats_interval_s
        if interval <= 0:
            return
        prev = self.snapshot()
        while True:
            await asyncio.sleep(interval)
            cur = self.snapshot()
            rates = {
                f"{k}_per_s": round((cur[k] - prev[k]) / interval, 1)
                for k in ("msgs_in", "msgs_out", "bytes_in", "bytes_out")
            }
            log.info("stats", extra={"event": "stats", **cur, **rates})
            prev = cur

    def devices(self) -> list[dict[str, Any]]:
        """The connected clients and their counters (the admin API's /v1/devices)."""
        return sorted((c.counters() for c in list(self.sessions.connections) if c.client_id),
                      key=lambda d: str(d["client_id"]))

    def log_connections(self) -> None:
        """Per-connection counters, one log line each (SIGUSR1)."""
        for conn in list(self.sessions.connections):
            log.info("connection", extra={"event": "connection_stats", **conn.counters()})
