"""The bridge: MQTT sessions on one side, the log (Kafka protocol) on the other.

Uplink: ``publish`` maps a device topic to (Kafka topic, key) and hands the record to
the batching producer; QoS 1 is acknowledged by the connection when the producer's
future resolves (acks=all). Unmapped topics are routed between MQTT clients locally.
Downlink: the fetcher hands each partition's new records to ``on_records``; each
record becomes one ``OutMessage`` shared by every matching session.
Persistent sessions store their subscriptions and resume offsets in the log
(``session_store``) and re-read what they missed on reconnect (``_catch_up``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from commonlib.source_limits import ConnectionRate, LoginBackoff
from commonlib.tls_accept import HandshakeFailures, tls_accepting
from kafkaproto.records import Record

from .acl import AclFile, Authorizer, Identity, IdentityBinding
from .auth import Credentials
from .codec import MQTT_5, Connect, Reason, SubOptions, topic_matches
from .codec.topics import filters_overlap
from .compacted import ensure_compacted_topic
from .config import BridgeConfig
from .connection import Connection, FlushQueue
from .kafka_client import KafkaClient, KafkaError, TopicPartition
from .kafka_fetcher import LATEST, Fetcher
from .kafka_producer import Producer, headers_size
from .latency import puback_histogram
from .mapping import ROUTE_CACHE_SIZE, Mapping, UplinkTopics, valid_kafka_topic
from .record_headers import property_headers, record_properties, user_property_header
from .retained_log import RetainedLog
from .session import EMPTY_DICT, Delivery, OutMessage, Qos2In, Session
from .session_store import (
    PERMANENT_ERRORS,
    SessionStore,
    StoredSession,
    TopicSessionStore,
    choose_store,
)
from .shared import hand_over
from .subscriptions import RetainedStore, SubscriptionIndex
from .tls import certificate_cn, server_context

if TYPE_CHECKING:
    from .websocket import WebSocketListener

log = logging.getLogger(__name__)


class CannotListen(OSError):
    """The MQTT port cannot be bound (taken, or not an address of this machine)."""

NEVER = 0xFFFFFFFF
#: batch size of the session/retained producer: a batch closes at this size, so it stays
#: below one state (``--max-session-bytes``) or retained message plus 64 KiB, the
#: max.message.bytes headroom the compacted topics are created with
STATE_BATCH_BYTES = 32 * 1024
#: v5 PUBLISH properties forwarded to local subscribers (the rest are per hop).
_FORWARDED = ("payload_format_indicator", "message_expiry_interval", "content_type",
              "response_topic", "correlation_data", "user_property")


@dataclass
class Stats:
    """Bridge-wide counters (per-connection ones live on each Connection)."""

    connections_total: int = 0
    refused: int = 0
    protocol_errors: int = 0
    msgs_in: int = 0
    msgs_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    uplink_records: int = 0
    local_routed: int = 0
    downlink_records: int = 0
    downlink_unroutable: int = 0
    denied_connect: int = 0
    denied_publish: int = 0
    denied_subscribe: int = 0
    session_save_failures: int = 0
    refused_sessions: int = 0  # CONNECTs refused: max_sessions reached
    retained_refused: int = 0  # retained messages not kept: max_retained_messages/_bytes
    queued_dropped: int = 0  # outgoing messages dropped from full queues (of ended sessions)
    early_overflows: int = 0  # connections closed: over max_packets/bytes_before_connack
    topic_levels_refused: int = 0  # PUBLISH topics / SUBSCRIBE filters over max_topic_levels
    sessions_taken_over: int = 0  # sessions handed to another bridge that the client moved to


def _pack_opts(o: SubOptions) -> int:
    return o.qos | (4 if o.no_local else 0) | (8 if o.retain_as_published else 0) | (o.retain_handling << 4)


def _unpack_opts(v: int) -> SubOptions:
    return SubOptions(v & 3, bool(v & 4), bool(v & 8), (v >> 4) & 3)


class Bridge:
    """Owns the listener, the sessions, the Kafka client, producer and fetcher."""

    def __init__(self, config: BridgeConfig) -> None:
        self.config = config
        self.mapping = Mapping.parse(config.uplink, config.downlink)
        self.credentials = Credentials.load(config.credentials_file) if config.credentials_file else None
        self.authorizer: Authorizer = (
            AclFile.load(config.acl_file) if config.acl_file
            else IdentityBinding([r.mqtt_topic for r in self.mapping.downlink])
        )
        self.uplink_allowed = UplinkTopics(
            config.uplink_topics, {r.kafka_topic for r in self.mapping.downlink} | {config.session_topic, config.retained_topic}
        )
        self._downlink_filters = [r.mqtt_filter for r in self.mapping.downlink]
        self._refill_bound = self._refill  # one bound method shared by every session
        #: client id -> the identity (username or certificate CN; None = anonymous) holding it
        self.owners: dict[str, str | None] = {}
        self.ssl_context = (
            server_context(config.tls_certfile, config.tls_keyfile, config.tls_cafile,
                           config.require_certificate)
            if config.tls_certfile else None
        )
        self.client = KafkaClient(config.bootstrap_servers)
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
        self.retained_log = RetainedLog(
            self.client, self.state_producer, config.retained_topic, self._apply_retained,
            config.max_packet_size + 65536,
        )
        self.store: SessionStore | None = None
        self.sessions: dict[str, Session] = {}
        self.connections: set[Connection] = set()
        self.flushes = FlushQueue()  # connections' output, written once per loop turn
        self.index = SubscriptionIndex()
        self.retained = RetainedStore(config.max_retained_messages, config.max_retained_bytes)
        self.stats = Stats()
        #: PUBLISH (QoS 1/2) received -> its PUBACK/PUBREC written (the log write between)
        self.puback_latency = puback_histogram()
        self.uplink_topics: set[str] = set()
        #: MQTT topic -> (client id, the uplink record's headers for the two)
        #: MQTT topic -> (client id, its two record headers, their size for the producer)
        self._uplink_headers: dict[str, tuple[str, tuple[tuple[str, bytes | None], ...], int]] = {}
        self.server: asyncio.AbstractServer | None = None
        self.tls_server: asyncio.AbstractServer | None = None
        self.tls_failures = HandshakeFailures()  # failed TLS handshakes, logged rate-limited
        self._close_handshakes: Callable[[], None] = lambda: None
        self.port = 0
        self.tls_port = 0
        self.ws_listeners: list[WebSocketListener] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self.connection_rate = ConnectionRate(config.max_connection_rate)
        self.login_backoff = LoginBackoff(config.failed_login_delay_ms / 1000,
                                          config.failed_login_delay_max_ms / 1000)
        #: client id -> (timer, publish now) of a will waiting for its delay (v5)
        self._will_timers: dict[str, tuple[asyncio.TimerHandle, Callable[[], None]]] = {}
        self._stopping = False
        self._log_down_warned = 0.0
        #: persistent sessions -> outbound QoS 2 packet ids whose PUBREL waits for a save
        self._pubrel_wait: dict[Session, list[int]] = {}

    # ---- life cycle -----------------------------------------------------------------
    async def start(self) -> None:
        cfg = self.config
        self.producer.start()
        self.state_producer.start()
        await self._retrying("retained topic", self.retained_log.create)
        if self._follow_sessions:  # compacted before the fetcher's metadata could auto-create it
            await self._retrying("session topic", lambda: ensure_compacted_topic(
                self.client, cfg.session_topic, 8, cfg.max_session_bytes + 65536))
        self.fetcher.start()
        await self.fetcher.ready.wait()
        await self._retrying("retained messages", self.retained_log.load)
        followed = [tp for tp in self.fetcher.positions
                    if tp[0] not in (cfg.retained_topic, cfg.session_topic)]
        anchor = min(followed) if followed else ("commands", 0)
        while True:
            try:
                self.store = await choose_store(
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
                if isinstance(self.store, TopicSessionStore):
                    self.store.on_taken = self._surrender
                    self.store.follower = self.fetcher
                break
            except KafkaError as exc:
                log.warning("session store not ready (%s); retrying", exc)
                await asyncio.sleep(1.0)
        loop = asyncio.get_running_loop()
        host, port = cfg.host, cfg.port
        try:
            if self.ssl_context is not None:
                host, port = cfg.tls_host or cfg.host, cfg.tls_port
                # The handshake runs by hand so that failed ones are logged and counted.
                factory, self._close_handshakes = tls_accepting(
                    lambda: Connection(self, tls=True), self.ssl_context, "MQTT-TLS",
                    self.tls_failures, cfg.connect_timeout_s)
                self.tls_server = await loop.create_server(
                    factory, host, cfg.tls_port, backlog=4096, reuse_address=True,
                    reuse_port=cfg.reuse_port or None)
                self.tls_port = self.tls_server.sockets[0].getsockname()[1]
                log.info(
                    "mqtt-bridge TLS listener on %s:%d (client certificates: %s)", host, self.tls_port,
                    "required" if cfg.require_certificate else "optional" if cfg.tls_cafile else "not asked",
                    extra={"event": "listening_tls", "port": self.tls_port},
                )
            if cfg.plaintext:
                host, port = cfg.host, cfg.port
                self.server = await loop.create_server(
                    lambda: Connection(self), cfg.host, cfg.port, backlog=4096, reuse_address=True,
                    reuse_port=cfg.reuse_port or None,
                )
                self.port = self.server.sockets[0].getsockname()[1]
            for ws_host, ws_port, ctx in ((cfg.ws_host, cfg.ws_port, None),
                                          (cfg.wss_host, cfg.wss_port, self.ssl_context)):
                if ws_port is None:
                    continue
                host, port = ws_host or cfg.host, ws_port
                from .websocket import WebSocketListener  # aiohttp: 12 MB, loaded only here

                listener = WebSocketListener(self, ssl_context=ctx, tls_failures=self.tls_failures,
                                             handshake_timeout_s=cfg.connect_timeout_s)
                self.ws_listeners.append(listener)
                await listener.start(host, port)
                log.info("mqtt-bridge WebSocket%s listener on %s:%d (subprotocol mqtt, /mqtt and /)",
                         " TLS" if ctx else "", host, listener.port,
                         extra={"event": "listening_wss" if ctx else "listening_ws", "port": listener.port})
        except OSError as exc:
            raise CannotListen(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
        for coro in (self._housekeeping(), self._commit_loop(), self._stats_loop()):
            self.track(loop.create_task(coro))
        log.info(
            "mqtt-bridge listening on %s:%d, log at %s",
            cfg.host, self.port or self.tls_port, cfg.bootstrap_servers,
            extra={"event": "listening", "port": self.port or self.tls_port},
        )

    async def _retrying(self, what: str, step: Callable[[], Awaitable[Any]]) -> None:
        while True:
            try:
                await step()
                return
            except KafkaError as exc:
                log.warning("%s not ready (%s); retrying", what, exc)
                await asyncio.sleep(1.0)

    def _apply_retained(
        self, topic: str, payload: bytes | None, props: dict[str, Any] | None, timestamp_ms: int = -1,
        qos: int = 2,
    ) -> None:
        if not payload:
            self.retained.set(topic, None)
            return
        msg = OutMessage(topic, payload, props)
        if msg.expires_at is not None and props and timestamp_ms >= 0:
            msg.expires_at = timestamp_ms / 1000 + props["message_expiry_interval"]
        self._keep_retained(topic, msg, qos)

    def _keep_retained(self, topic: str, msg: OutMessage, qos: int) -> bool:
        """Store a retained message if the limits allow; else count and log the refusal."""
        if self.retained.set(topic, msg, qos):
            return True
        self._retained_refused(topic)
        return False

    def _retained_refused(self, topic: str) -> None:
        self.stats.retained_refused += 1
        n = self.stats.retained_refused
        if n <= 5 or n % 1000 == 0:
            log.warning(
                "retained message on %r not kept: limit of %d messages / %d bytes reached (%d refused so far)",
                topic, self.config.max_retained_messages, self.config.max_retained_bytes, n,
                extra={"event": "retained_refused", "topic": topic},
            )

    def _retain(self, topic: str, payload: bytes, props: dict[str, Any] | None, qos: int) -> None:
        """A retained PUBLISH from a client: in memory now, in the compacted topic for good."""
        self._apply_retained(topic, payload, props, -1, qos)
        self.retained_log.write(topic, payload, props, qos)

    async def stop(self) -> None:
        """Stop accepting, tell clients, save persistent sessions, flush the producer."""
        self._stopping = True
        for server in (self.server, self.tls_server):
            if server is not None:
                server.close()
        self._close_handshakes()
        for conn in list(self.connections):
            conn.clean_disconnect = True  # a bridge shutdown is not the client's failure
            conn.close(Reason.SERVER_SHUTTING_DOWN, "server shutting down")
        await asyncio.sleep(0)
        for conn in list(self.connections):
            self.detach(conn, abnormal=False)
        for listener in self.ws_listeners:
            with contextlib.suppress(Exception):
                await listener.stop()
        await self._save_sessions(all_persistent=True)
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

    # ---- admission and CONNECT -------------------------------------------------------
    def admit(self, conn: Connection) -> str | None:
        cfg = self.config
        if self._stopping:
            return "shutting down"
        if len(self.connections) >= cfg.max_connections:
            self.stats.refused += 1
            return f"connection limit {cfg.max_connections} reached"
        if not self.connection_rate.take(conn.peer_host, time.monotonic()):
            self.stats.refused += 1
            return f"connection rate above {cfg.max_connection_rate}/s from {conn.peer_host}"
        self.connections.add(conn)
        self.stats.connections_total += 1
        return None

    async def connect(self, conn: Connection, p: Connect) -> tuple[Reason, dict[str, Any], bool]:
        """Authenticate, pick/restore the session; returns (reason, CONNACK properties, present)."""
        cfg = self.config
        v5 = p.protocol_level == MQTT_5
        props: dict[str, Any] = {}
        if p.properties.get("authentication_method"):
            return Reason.BAD_AUTHENTICATION_METHOD, {}, False
        username: str | None = None  # authenticated identity; None = anonymous
        if cfg.use_identity_as_username and conn.tls:
            username = certificate_cn(conn.peer_certificate())
            if username is None:
                self.stats.denied_connect += 1
                log.warning("refusing %s: client certificate without a common name", conn.peer)
                return Reason.NOT_AUTHORIZED, {}, False
        elif self.credentials is not None:
            wait = self.login_backoff.wait(conn.peer_host, time.monotonic())
            if wait > 0:
                await asyncio.sleep(wait)
            ok = await asyncio.to_thread(self.credentials.check, p.username, p.password)
            if ok:
                self.login_backoff.succeeded(conn.peer_host)
            else:
                self.login_backoff.failed(conn.peer_host, time.monotonic())
                self.stats.denied_connect += 1
                log.warning("bad credentials from %s (user %r)", conn.peer, p.username,
                            extra={"event": "denied_connect", "reason": "credentials"})
                return Reason.BAD_USER_NAME_OR_PASSWORD, {}, False
            username = p.username
        elif not cfg.allow_anonymous:
            self.stats.denied_connect += 1
            return Reason.NOT_AUTHORIZED, {}, False
        cid = p.client_id
        if not cid:
            if not v5 and not p.clean_start:
                return Reason.CLIENT_IDENTIFIER_NOT_VALID, {}, False
            cid = "auto-" + uuid.uuid4().hex
            if v5:
                props["assigned_client_identifier"] = cid
        if len(cid.encode()) > cfg.max_client_id_bytes or cid.startswith("$"):
            return Reason.CLIENT_IDENTIFIER_NOT_VALID, {}, False
        identity = Identity(cid, username)
        refusal = self._refuse_identity(conn, identity, p)
        if refusal is not None:
            return refusal, {}, False
        conn.identity = identity
        conn.client_id = cid
        conn.keep_alive = p.keep_alive
        if v5:
            conn.send_quota = min(cfg.max_inflight, p.properties.get("receive_maximum", 65535))
            conn.client_max_packet = p.properties.get("maximum_packet_size", 0)
            conn.alias_max = min(p.properties.get("topic_alias_maximum", 0), cfg.topic_alias_maximum)
            expiry = p.properties.get("session_expiry_interval", 0)
            props.update(
                receive_maximum=cfg.receive_maximum,
                topic_alias_maximum=cfg.topic_alias_maximum,
                maximum_packet_size=cfg.max_packet_size,
                retain_available=1,
                wildcard_subscription_available=1,
                shared_subscription_available=1,
                subscription_identifier_available=1,
            )
        else:
            expiry = 0 if p.clean_start else (cfg.persistent_client_expiration_s or NEVER)
        assert self.store is not None
        try:
            if not await self.store.claim(cid, clean=p.clean_start):
                return Reason.SERVER_BUSY, {"reason_string": "client id taken by another bridge"}, False
        except KafkaError as exc:
            log.error("cannot claim session %s: %s", cid, exc)
            return Reason.SERVER_UNAVAILABLE, {}, False
        if conn.closing:
            return Reason.UNSPECIFIED_ERROR, {}, False
        old = self.sessions.get(cid)
        if old is not None and old.conn is not None:
            prev = old.conn
            log.info("client %s taken over by %s", cid, conn.peer)
            self.detach(prev, abnormal=True)
            prev.close(Reason.SESSION_TAKEN_OVER, "session taken over")
            old = self.sessions.get(cid)
        self._settle_will(cid, session_ends=p.clean_start)  # (also the one just made)
        if old is None and len(self.sessions) >= cfg.max_sessions:
            self.stats.refused_sessions += 1
            log.warning(
                "refusing %s (client %r): session limit %d reached", conn.peer, cid, cfg.max_sessions,
                extra={"event": "refused_session", "client_id": cid},
            )
            return Reason.QUOTA_EXCEEDED, {"reason_string": "session limit reached"}, False
        present = False
        if p.clean_start:
            if old is not None:
                self._discard(old)
            if self.store.name == "topic" or old is not None:
                await self.store.delete(cid)
            session = Session(cid, max_queued=cfg.max_queued)
        elif old is not None:
            session, present = old, True
        else:
            try:
                stored = await self.store.load(cid)
            except KafkaError as exc:
                log.error("cannot load session %s: %s", cid, exc)
                return Reason.SERVER_UNAVAILABLE, {}, False
            if stored is not None and stored.owned_by_another(username):
                self.stats.denied_connect += 1
                return Reason.NOT_AUTHORIZED, {}, False
            session = Session(cid, max_queued=cfg.max_queued)
            if stored is not None:
                present = True
                session.offsets = dict(stored.offsets)
                for f, packed in stored.subscriptions.items():
                    if not self.authorizer.may_subscribe(identity, f):
                        log.warning("dropping stored subscription %r of %s: not authorized now", f, cid)
                        continue
                    opts = _unpack_opts(packed)
                    session.subs[f] = opts
                    if packed >> 8:
                        if session.sub_ids is EMPTY_DICT:
                            session.sub_ids = {}
                        session.sub_ids[f] = packed >> 8
                    self.index.add(session, f, opts)
                session.restore(stored.qos2_in, stored.inflight)
        if conn.closing:
            return Reason.UNSPECIFIED_ERROR, {}, False
        if not self.store.holds(cid):  # another bridge's newer claim won while we waited
            self._discard(session)
            return Reason.SERVER_BUSY, {"reason_string": "client id taken by another bridge"}, False
        if self.owners.get(cid, username) != username:  # another identity got it meanwhile
            self.stats.denied_connect += 1
            return Reason.NOT_AUTHORIZED, {}, False
        if session.expiry_handle is not None:
            session.expiry_handle.cancel()
            session.expiry_handle = None
        session.persistent = expiry > 0
        session.expiry_interval = expiry
        session.refill = self._refill_bound
        self.sessions[cid] = session
        self.owners[cid] = username
        session.conn = conn
        session.epoch += 1
        conn.session = session
        conn.will = p.will
        self._track(session)
        log.info(
            "client %s connected from %s (v%d, clean=%s, present=%s)",
            cid, conn.peer, p.protocol_level, p.clean_start, present,
            extra={"event": "connect", "client_id": cid},
        )
        return Reason.SUCCESS, props, present

    def _refuse_identity(self, conn: Connection, who: Identity, p: Connect) -> Reason | None:
        """Not authorized: another identity's client id, or a will the client may not publish."""
        cid = who.client_id
        stored = self.store.stored(cid) if self.store is not None else None
        if (cid in self.owners and self.owners[cid] != who.username) or (
                stored is not None and stored.owned_by_another(who.username)):
            self.stats.denied_connect += 1
            log.warning(
                "refusing %s: client id %r belongs to another identity (user %r)",
                conn.peer, cid, who.username,
                extra={"event": "denied_connect", "client_id": cid, "reason": "client id owner"},
            )
            return Reason.NOT_AUTHORIZED
        if p.will is not None and not self._may_publish(who, p.will.topic):
            self.stats.denied_connect += 1
            log.warning(
                "refusing %s (client %r): will topic %r not authorized", conn.peer, cid, p.will.topic,
                extra={"event": "denied_connect", "client_id": cid, "reason": "will topic"},
            )
            return Reason.NOT_AUTHORIZED
        return None

    def _may_publish(self, who: Identity, topic: str) -> bool:
        if any(topic_matches(f, topic) for f in self._downlink_filters):
            return False  # the downlink is written by the log only
        return self.authorizer.may_publish(who, topic)

    def may_publish(self, conn: Connection, topic: str) -> bool:
        """Is this connection allowed to publish to ``topic``? (Remembered per connection.)"""
        cache = conn.publish_verdicts
        try:
            return cache[topic]
        except KeyError:
            pass
        assert conn.identity is not None
        ok = self._may_publish(conn.identity, topic)
        if cache is EMPTY_DICT:
            cache = conn.publish_verdicts = {}
        elif len(cache) >= 256:
            cache.clear()
        cache[topic] = ok
        return ok

    def may_subscribe(self, conn: Connection, topic_filter: str) -> bool:
        assert conn.identity is not None
        return self.authorizer.may_subscribe(conn.identity, topic_filter)

    def after_connack(self, conn: Connection, present: bool) -> None:
        session = conn.session
        if session is None:
            return
        start = {tp: off for tp, off in session.offsets.items()
                 if off < self.fetcher.positions.get(tp, off)}
        if present:
            session.resend_inflight()
        if present and start:
            self._begin_catch_up(session, start)
        session.pump()

    def set_expiry(self, session: Session, expiry: int) -> None:
        session.expiry_interval = expiry
        session.persistent = expiry > 0

    # ---- uplink -------------------------------------------------------------------------
    def publish(
        self,
        conn: Connection | None,
        topic: str,
        payload: bytes,
        qos: int,
        retain: bool,
        props: dict[str, Any],
        client_id: str | None = None,
        qos2_nonce: str | None = None,
    ) -> asyncio.Future[int] | Reason:
        """Route one PUBLISH: to the log (a future for its acknowledgement) or locally."""
        cid = client_id if client_id is not None else (conn.client_id if conn else "") or ""
        fwd = {k: props[k] for k in _FORWARDED if k in props} if props else None
        if retain and payload and not self.retained.fits(topic, payload):
            self._retained_refused(topic)
            if conn is not None and conn.version == MQTT_5:
                return Reason.QUOTA_EXCEEDED  # v5: PUBACK/PUBREC 0x97, nothing written
            retain = False  # 3.1.1 (no negative ack) and wills: delivered, not retained
        route = self.mapping.route_up(topic)
        if route is None:
            if retain:
                self._retain(topic, payload, fwd, qos)
            self._route_local(conn, topic, payload, qos, retain, fwd)
            return Reason.SUCCESS
        ktopic, key = route
        refusal = self._check_uplink(ktopic)
        if refusal is not None:
            return refusal
        if retain:
            self._retain(topic, payload, fwd, qos)
        # a device sends to the same topic again and again: its two headers, encoded once
        known = self._uplink_headers.get(topic)
        if known is None or known[0] != cid:
            if len(self._uplink_headers) >= ROUTE_CACHE_SIZE:
                self._uplink_headers.clear()
            both = (("mqtt.topic", topic.encode()), ("mqtt.client_id", cid.encode()))
            known = self._uplink_headers[topic] = (cid, both, headers_size(both))
        headers: Sequence[tuple[str, bytes | None]] = known[1]
        self.stats.uplink_records += 1
        if not props and qos2_nonce is None:  # the common case: the two headers as they are
            # one future per produce batch, shared by its records (a failure is marked seen)
            return self.producer.send_shared(ktopic, key, payload, headers, known[2])
        headers = list(headers)
        if props:
            for k, v in props.get("user_property", ()):
                headers.append((user_property_header(k), v.encode()))
            if len(props) > ("user_property" in props):
                headers += property_headers(props)  # request/response: see record_headers
        if qos2_nonce is not None:
            headers.append(("mqtt.qos2", qos2_nonce.encode()))
        return self.producer.send_shared(ktopic, key, payload, headers)

    def _check_uplink(self, ktopic: str) -> Reason | None:
        if ktopic in self.uplink_topics:  # checked before: no regex per message
            return None
        if not valid_kafka_topic(ktopic):
            return Reason.TOPIC_NAME_INVALID
        if ktopic not in self.uplink_topics:
            if not self.uplink_allowed.permits(ktopic):
                return Reason.NOT_AUTHORIZED  # not in uplink_topics (the connection logs it)
            if len(self.uplink_topics) >= self.config.max_topics:
                return Reason.QUOTA_EXCEEDED
            self.uplink_topics.add(ktopic)
        return None

    # ---- QoS 2: exactly one record per PUBLISH ---------------------------------------------
    def publish_qos2(
        self, conn: Connection, session: Session, pid: int, topic: str, payload: bytes, retain: bool,
        props: dict[str, Any],
    ) -> asyncio.Future[Any] | Reason:
        """A QoS 2 PUBLISH: its future resolves (PUBREC) once its one record is in the log.

        A packet id already awaiting PUBREL is the same message again: it is not written
        again. For a persistent session the packet id, a nonce and where the record will
        land are saved before the write; a re-send after a bridge crash finds the nonce in
        the log (``mqtt.qos2`` header) or writes it then (see ``Qos2In``).
        """
        entry = session.qos2_in.get(pid)
        loop = asyncio.get_running_loop()
        if entry is not None:
            if entry.future is None or _failed(entry.future):
                # loaded from the store, or its write failed (log down, 3.1.1 closed the
                # connection and the client sends it again): look in the log first
                entry.future = loop.create_task(self._qos2_recover(conn, entry, topic, payload, retain, props))
            return cast("asyncio.Future[Any]", entry.future)
        if retain and payload and conn.version == MQTT_5 and not self.retained.fits(topic, payload):
            self._retained_refused(topic)
            return Reason.QUOTA_EXCEEDED  # PUBREC 0x97 before anything is saved or written
        route = self.mapping.route_up(topic)
        if route is None:
            result = self.publish(conn, topic, payload, 2, retain, props)
            if result == Reason.SUCCESS:
                done: asyncio.Future[Any] = loop.create_future()
                done.set_result(None)
                if session.qos2_in is EMPTY_DICT:
                    session.qos2_in = {}
                session.qos2_in[pid] = Qos2In("", "")
                session.qos2_in[pid].future = done
            return result
        refusal = self._check_uplink(route[0])
        if refusal is not None:
            return refusal
        entry = Qos2In(uuid.uuid4().hex, route[0])
        if session.qos2_in is EMPTY_DICT:
            session.qos2_in = {}
        session.qos2_in[pid] = entry
        entry.future = loop.create_task(self._qos2_write(conn, session, entry, topic, payload, retain, props))
        return cast("asyncio.Future[Any]", entry.future)

    async def _qos2_write(
        self, conn: Connection, session: Session, entry: Qos2In, topic: str, payload: bytes,
        retain: bool, props: dict[str, Any],
    ) -> None:
        if session.persistent and self.store is not None:
            await self._while_log_down("QoS 2 bookkeeping", lambda: self._qos2_mark(session, entry))
        result = self.publish(conn, topic, payload, 2, retain, props, qos2_nonce=entry.nonce)
        if isinstance(result, asyncio.Future):
            await result
        elif result >= 0x80:
            raise KafkaError(f"refused: {result!r}")

    async def _qos2_mark(self, session: Session, entry: Qos2In) -> None:
        """Where the record will land (end offsets now) and the nonce, saved with the session."""
        assert self.store is not None
        meta = await self.client.partitions(entry.ktopic)
        ends = await self.client.list_offsets([(entry.ktopic, p) for p in meta.partitions], LATEST)
        entry.starts = {p: o for (_t, p), o in ends.items()}
        await self.store.save(session.client_id, self._state(session))

    async def _while_log_down(self, what: str, step: Callable[[], Awaitable[Any]]) -> None:
        """Run ``step``, retrying a log that does not answer (restarting) as the producer
        retries a write: up to ``--delivery-timeout-s``, pausing 0.1 s growing to 1 s."""
        deadline = time.monotonic() + self.config.delivery_timeout_s
        pause = 0.1
        while True:
            try:
                await step()
                return
            except KafkaError as exc:
                if exc.code in PERMANENT_ERRORS or time.monotonic() + pause > deadline:
                    raise
                now = time.monotonic()
                if now - self._log_down_warned > 5.0:  # one line per 5 s, not one per message
                    self._log_down_warned = now
                    log.warning("%s failed (%s); retrying for up to %.0fs", what, exc, deadline - now)
                await asyncio.sleep(pause)
                pause = min(1.0, pause * 2)

    async def _qos2_recover(
        self, conn: Connection, entry: Qos2In, topic: str, payload: bytes, retain: bool,
        props: dict[str, Any],
    ) -> None:
        """After a restart: is the record of ``entry`` already in the log? Else write it now."""
        nonce = entry.nonce.encode()
        tps = [(entry.ktopic, p) for p in entry.starts]
        found: list[bool] = []

        async def look() -> None:
            await self.client.partitions(entry.ktopic)
            ends = await self.client.list_offsets(tps, LATEST)
            for tp in tps:
                async for _nxt, records in self.fetcher.fetch_range(tp, entry.starts[tp[1]], ends[tp]):
                    for r in records:
                        if ("mqtt.qos2", nonce) in (r.headers or ()):
                            log.info("QoS 2 message %s of %s already in the log at %s-%d@%d",
                                     entry.nonce, conn.client_id, tp[0], tp[1], r.offset)
                            found.append(True)
                            return

        if tps:
            await self._while_log_down("QoS 2 look-up", look)
            if found:
                return
        result = self.publish(conn, topic, payload, 2, retain, props, qos2_nonce=entry.nonce)
        if isinstance(result, asyncio.Future):
            await result
        elif result >= 0x80:
            raise KafkaError(f"refused: {result!r}")

    def released(self, session: Session, pid: int) -> bool:
        """PUBREL: the client will not send this packet id's message again. False if the
        session held nothing for it."""
        if not session.qos2_in or session.qos2_in.pop(pid, None) is None:
            return False
        if session.persistent:
            session.dirty = True
        return True

    def _route_local(
        self, conn: Connection | None, topic: str, payload: bytes, qos: int, retain: bool,
        props: dict[str, Any] | None,
    ) -> None:
        matches, shared = self.index.match_copies(topic)
        if not matches and not shared:
            return
        self.stats.local_routed += 1
        msg = OutMessage(topic, payload, props)
        sender = conn.session if conn is not None else None
        for session, opts in matches.items():
            ids = None
            if sender is not None and session is sender:
                # no-local is per subscription: an overlapping one without it still
                # takes the message, at its own QoS and with its own identifiers
                own = sender.own_copy(topic)
                if own is None:
                    continue
                opts, ids = own
            self._deliver_local(session, msg, min(qos, opts.qos), retain and opts.retain_as_published, ids)
        for session, opts, name in shared:
            ids = [session.sub_ids[name]] if name in session.sub_ids else []
            self._deliver_local(session, msg, min(qos, opts.qos), retain and opts.retain_as_published, ids)

    @staticmethod
    def _deliver_local(session: Session, msg: OutMessage, qos: int, retain: bool, ids: list[int] | None) -> None:
        if session.conn is None:
            if session.persistent and qos:
                # an offline persistent session keeps QoS 1/2 messages for its return,
                # in memory (up to --max-queued; not across a bridge restart)
                session.enqueue(msg, qos, retain, ids)
            return
        session.enqueue(msg, qos, retain, ids)
        session.pump()

    def _settle_will(self, cid: str, *, session_ends: bool) -> None:
        """A new connection for ``cid``: a will waiting for its delay is cancelled, or sent
        now when that connection's Clean Start ends the session (MQTT 5 3.1.2.5)."""
        pending = self._will_timers.pop(cid, None)
        if pending is not None:
            pending[0].cancel()
            if session_ends:
                pending[1]()

    def _publish_will(self, conn: Connection, session: Session | None = None) -> None:
        will = conn.will
        conn.will = None
        if will is None or conn.client_id is None:
            return
        cid = conn.client_id

        def fire() -> None:
            self._will_timers.pop(cid, None)
            log.info("publishing will of %s to %s", cid, will.topic)
            result = self.publish(None, will.topic, will.payload, will.qos, will.retain,
                                  will.properties, client_id=cid)
            if isinstance(result, asyncio.Future):
                result.add_done_callback(_consume)

        delay = will.properties.get("will_delay_interval", 0) if will.properties else 0
        if session is not None and session.persistent and session.expiry_interval != NEVER:
            delay = min(delay, session.expiry_interval)  # the will goes when the session ends
        elif session is not None and not session.persistent:
            delay = 0  # the session ends now (v5 3.1.3.2.2)
        if delay:
            self._will_timers[cid] = (asyncio.get_running_loop().call_later(delay, fire), fire)
        else:
            fire()

    # ---- subscriptions ----------------------------------------------------------------------
    def subscribe(self, session: Session, topic_filter: str, opts: SubOptions, sub_id: int = 0) -> None:
        session.subs[topic_filter] = opts
        if sub_id:
            if session.sub_ids is EMPTY_DICT:
                session.sub_ids = {}
            session.sub_ids[topic_filter] = sub_id
        elif session.sub_ids:
            session.sub_ids.pop(topic_filter, None)
        self.index.add(session, topic_filter, opts)
        self._track(session)
        if session.persistent:
            session.dirty = True

    def after_subscribe(self, session: Session, granted: list[tuple[str, SubOptions, bool]]) -> None:
        for topic_filter, opts, existed in granted:
            if opts.retain_handling == 2 or (opts.retain_handling == 1 and existed):
                continue
            if topic_filter.startswith("$share/"):
                continue  # no retained messages for a shared subscription (MQTT 5 4.8.2)
            # sent because of this subscription: its identifier only (MQTT 5 3.3.4)
            ids = [session.sub_ids[topic_filter]] if topic_filter in session.sub_ids else []
            for msg, qos in self.retained.matching(topic_filter):
                session.enqueue(msg, min(qos, opts.qos), True, ids)
        session.pump()

    def unsubscribe(self, session: Session, topic_filter: str) -> bool:
        found = session.subs.pop(topic_filter, None) is not None
        if session.sub_ids:
            session.sub_ids.pop(topic_filter, None)
        self.index.remove(session, topic_filter)
        self._track(session)
        if session.persistent:
            session.dirty = True
        return found

    def _track(self, session: Session) -> None:
        """Follow exactly the downlink partitions the session's filters can receive."""
        filters = [f for f in session.subs if not f.startswith("$share/")]
        wanted: set[TopicPartition] = set()
        for rule in self.mapping.downlink:
            if any(filters_overlap(f, rule.mqtt_filter) for f in filters):
                wanted.update(self.fetcher.partitions_of(rule.kafka_topic))
        for tp in list(session.offsets):
            if tp not in wanted:
                del session.offsets[tp]
        for tp in wanted:
            if tp not in session.offsets:
                session.offsets[tp] = self.fetcher.positions.get(tp, 0)

    # ---- downlink -----------------------------------------------------------------------
    def on_records(self, tp: TopicPartition, records: list[Record]) -> None:
        rule = self.mapping.by_kafka_topic.get(tp[0])
        if rule is None:
            if tp[0] == self.config.retained_topic:
                self.retained_log.on_records(records)
            elif tp[0] == self.config.session_topic and isinstance(self.store, TopicSessionStore):
                self.store.on_records(records)
            return
        self.stats.downlink_records += len(records)
        touched: set[Session] = set()
        match = self.index.match_copies
        for r in records:
            topic = rule.topic_for(r.key)
            if topic is None:
                self.stats.downlink_unroutable += 1
                continue
            msg = OutMessage(topic, r.value or b"", _user_props(r), tp, r.offset)
            if rule.retain:
                if r.value:
                    self._keep_retained(topic, msg, rule.qos)
                else:
                    self.retained.set(topic, None)
            matches, shared = match(topic)
            # (message, qos, retain) by qos: one tuple shared by all its receivers
            deliveries: list[Delivery | None] = [None, None, None]
            for session, opts in matches.items():
                if session.conn is None:
                    continue  # offline persistent sessions re-read the log on reconnect
                qos = opts.qos if opts.qos < rule.qos else rule.qos
                d = deliveries[qos]
                if d is None:
                    d = deliveries[qos] = (msg, qos, False)
                if not session.deliver(d):
                    touched.add(session)
            for session, opts, name in shared:  # (online members only)
                session.enqueue(msg, min(opts.qos, rule.qos), False,
                                [session.sub_ids[name]] if name in session.sub_ids else [])
                touched.add(session)
        for session in touched:
            session.pump()

    def _refill(self, session: Session) -> None:
        gaps, session.gaps = session.gaps, EMPTY_DICT
        start = {tp: off for tp, off in gaps.items() if off < self.fetcher.positions.get(tp, off)}
        if start:
            self._begin_catch_up(session, start)

    def _begin_catch_up(self, session: Session, start: dict[TopicPartition, int]) -> None:
        """Hold live delivery and fix the range to re-read now, then run ``_catch_up``.

        Both must happen in the same step that decided to catch up, not when the task
        first runs: records the fetcher dispatches in between would otherwise go out live
        ahead of older ones and then again from the re-read range (which ends at the live
        position), i.e. out of order and twice, and a save in between would skip the range.
        """
        session.holding = True
        if session.catchup_pos is EMPTY_DICT:
            session.catchup_pos = {}
        session.catchup_pos.update(start)
        end = {tp: self.fetcher.positions.get(tp, off) for tp, off in start.items()}
        loop = asyncio.get_running_loop()
        self.track(loop.create_task(self._catch_up(session, start, end, session.epoch)))

    async def _catch_up(
        self,
        session: Session,
        start: dict[TopicPartition, int],
        end: dict[TopicPartition, int],
        epoch: int,
    ) -> None:
        """Re-read ``start[tp]`` .. ``end[tp]`` (the live position when it began) for a
        session that was away; ``_begin_catch_up`` set it up under ``epoch``."""
        delivered = 0
        try:
            for tp, off in start.items():
                rule = self.mapping.by_kafka_topic.get(tp[0])
                if rule is None:
                    continue
                async for nxt, records in self.fetcher.fetch_range(tp, off, end[tp]):
                    if session.epoch != epoch:
                        return
                    for r in records:
                        topic = rule.topic_for(r.key)
                        if topic is None:
                            continue
                        qos = -1
                        for f, o in session.subs.items():
                            if not f.startswith("$share/") and topic_matches(f, topic):
                                qos = max(qos, o.qos)
                        if qos < 0:
                            continue
                        session.own_queue().append(
                            (session.personal(OutMessage(topic, r.value or b"", _user_props(r), tp, r.offset)),
                             min(qos, rule.qos), False)
                        )
                        delivered += 1
                    session.catchup_pos[tp] = nxt
                    session.pump()
                    while len(session.queue) > session.max_queued and session.epoch == epoch:
                        await asyncio.sleep(0.02)
                session.catchup_pos.pop(tp, None)
        except KafkaError as exc:
            log.warning("catch-up for %s failed: %s; gaps kept for a retry", session.client_id, exc)
            for tp, pos in session.catchup_pos.items():
                if session.gaps is EMPTY_DICT:
                    session.gaps = {}
                session.gaps[tp] = min(pos, session.gaps.get(tp, pos))
        finally:
            if session.epoch == epoch:
                if session.redeliver:  # what was not re-read (unsubscribed since) is gone
                    queued = {(m.tp[0], m.tp[1], m.offset) for m, _q, _r in session.queue if m.tp}
                    for k in [k for k in session.redeliver if k not in queued]:
                        del session.redeliver[k]
                if session.catchup_pos:
                    session.catchup_pos.clear()
                session.holding = False
                if session.held:
                    session.own_queue().extend(session.held)
                session.held.clear()
                session.pump()
                log.info("session %s caught up: %d messages from the log", session.client_id, delivered)

    # ---- disconnect ----------------------------------------------------------------------
    def detach(self, conn: Connection, *, abnormal: bool) -> None:
        self.connections.discard(conn)
        session = conn.session
        conn.session = None
        if abnormal and not self._stopping:
            self._publish_will(conn, session)
        if session is None or session.conn is not conn:
            return
        live = self.fetcher.positions
        if session.persistent:
            session.offsets = session.resume_offsets(live)
            session.dirty = True
        session.conn = None
        session.epoch += 1
        moved = hand_over(self.index, session, ending=not session.persistent)
        # what is re-read from the log on return is dropped; a persistent session keeps
        # its locally routed QoS 1/2 messages not yet sent (MQTT 4.1), unless handed over
        kept: list[Delivery] = []
        if session.persistent:
            gone = {id(d) for d in moved}
            kept = [d for d in (*session.queue, *session.held)
                    if d[0].tp is None and d[1] and id(d) not in gone]
        session.queue.clear()
        session.held.clear()
        if kept:
            session.own_queue().extend(kept)
        if session.persistent:
            session.suspend()
        else:
            session.inflight.clear()
        session.holding = False
        if session.catchup_pos:
            session.catchup_pos.clear()
        if session.gaps:
            session.gaps.clear()
        if session.persistent:
            self._save_soon(session)
            if session.expiry_interval != NEVER:
                session.expiry_handle = asyncio.get_running_loop().call_later(
                    session.expiry_interval, self._expire, session
                )
        else:
            self._discard(session)
        log.info(
            "client %s disconnected (%s)", session.client_id, "abnormal" if abnormal else "normal",
            extra={"event": "disconnect", "client_id": session.client_id, **conn.counters()},
        )

    def _discard(self, session: Session) -> None:
        self.stats.queued_dropped += session.dropped
        session.dropped = 0
        for f in list(session.subs):
            self.index.remove(session, f)
        session.subs.clear()
        if self.sessions.get(session.client_id) is session:
            del self.sessions[session.client_id]
            self.owners.pop(session.client_id, None)

    def _expire(self, session: Session) -> None:
        if session.conn is None and self.sessions.get(session.client_id) is session:
            log.info("session %s expired", session.client_id)
            self._discard(session)
            if self.store is not None:
                self.track(asyncio.get_running_loop().create_task(
                    self.store.delete(session.client_id, release=True)))

    def _surrender(self, cid: str, nonce: str, claimant: str, clean: bool = False) -> None:
        """Another bridge claimed ``cid``: close our connection and hand over the final state;
        a delayed will goes now if the claim ends the session (``clean``), else never."""
        assert self.store is not None
        session = self.sessions.get(cid)
        state: StoredSession | None = None
        if session is not None:
            if session.conn is not None:
                prev = session.conn
                log.info("client %s taken over by bridge %s", cid, claimant,
                         extra={"event": "session_taken_over", "client_id": cid})
                self.detach(prev, abnormal=True)
                prev.close(Reason.SESSION_TAKEN_OVER, "session taken over by another bridge")
            if session.expiry_handle is not None:
                session.expiry_handle.cancel()
                session.expiry_handle = None
            state = self._state(session) if session.persistent else None
            self._discard(session)
            self.stats.sessions_taken_over += 1
        elif isinstance(self.store, TopicSessionStore):
            state = self.store.sessions.get(cid)  # held by an earlier run of this bridge
        self._settle_will(cid, session_ends=clean)
        self.track(asyncio.get_running_loop().create_task(self.store.release(cid, nonce, claimant, state)))

    # ---- durable session state ------------------------------------------------------------
    def _state(self, session: Session) -> StoredSession:
        expires = None
        if session.conn is None and session.expiry_interval != NEVER:
            expires = time.time() + session.expiry_interval
        return StoredSession(
            {f: _pack_opts(o) | (session.sub_ids.get(f, 0) << 8) for f, o in session.subs.items()},
            session.resume_offsets(self.fetcher.positions),
            expires,
            session.expiry_interval,
            session.qos2_state(),
            session.inflight_state(),
            self.owners.get(session.client_id),
            session.client_id in self.owners,
        )

    def room_for(self, session: Session, topic_filter: str) -> bool:
        """Would the session still fit the store's size limit with this subscription?"""
        if topic_filter in session.subs:
            return True
        size = len(self._state(session).to_json()) + len(topic_filter.encode()) * 2 + 16
        return size <= self.config.max_session_bytes

    def release_after_save(self, conn: Connection, session: Session, pid: int) -> None:
        """Outbound QoS 2 of a persistent session: PUBREL ``pid`` once a save of the session
        (its resume offset past the message, ``pid`` among the released) is in the log.

        Without it a bridge killed after PUBREL/PUBCOMP but before the periodic save
        re-sent the completed message as a DUP PUBLISH, which the client took as new.
        PUBRECs that arrive during a save wait for the next one (one save per round).
        """
        waiting = self._pubrel_wait.get(session)
        if waiting is not None:
            waiting.append(pid)
            return
        self._pubrel_wait[session] = [pid]
        self.track(asyncio.get_running_loop().create_task(self._save_then_release(conn, session)))

    async def _save_then_release(self, conn: Connection, session: Session) -> None:
        try:
            while True:
                pids = self._pubrel_wait.get(session)
                if not pids:
                    return
                self._pubrel_wait[session] = []
                try:
                    if self.store is not None:
                        await self.store.save(session.client_id, self._state(session))
                except KafkaError as exc:
                    self.stats.session_save_failures += 1
                    log.error("cannot save session %s before PUBREL (%s): after a crash these QoS 2 "
                              "messages may come again", session.client_id, exc,
                              extra={"event": "session_save_failed", "client_id": session.client_id})
                for pid in pids:
                    if pid in session.released and session.conn is conn:
                        conn.send_pubrel(pid)
        finally:
            self._pubrel_wait.pop(session, None)

    def _save_soon(self, session: Session) -> None:
        self.track(asyncio.get_running_loop().create_task(self._save(session)))

    async def _save(self, session: Session, *, release: bool = False) -> None:
        """Save one session; a failure is an error in the log and in ``session_save_failures``.

        A failure no retry can fix (too large for the store) is not retried until the
        session changes again; others are retried with a growing pause (up to a minute).
        """
        if self.store is None or self.sessions.get(session.client_id) is not session:
            return  # ended, or handed to another bridge
        session.dirty = False
        try:
            await self.store.save(session.client_id, self._state(session), release=release)
            session.save_failures = 0
        except KafkaError as exc:
            self.stats.session_save_failures += 1
            session.save_failures += 1
            permanent = exc.code in PERMANENT_ERRORS
            if not permanent:
                session.dirty = True
                session.retry_at = time.monotonic() + min(60.0, 2.0 ** session.save_failures)
            log.error(
                "cannot save session %s (%s): %s", session.client_id,
                "not retried until it changes" if permanent else f"attempt {session.save_failures}",
                exc, extra={"event": "session_save_failed", "client_id": session.client_id},
            )

    async def _save_sessions(self, *, all_persistent: bool = False) -> None:
        now = time.monotonic()
        todo = [s for s in self.sessions.values() if s.persistent and (
            all_persistent or (s.dirty and s.retry_at <= now))]
        if todo:
            await asyncio.gather(*(self._save(s, release=all_persistent) for s in todo),
                                 return_exceptions=True)

    async def _commit_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.session_commit_interval_s)
            await self._save_sessions()

    # ---- housekeeping ------------------------------------------------------------------------
    async def _housekeeping(self) -> None:
        """Keep-alive (1.5x the client's interval) and CONNECT timeouts, one pass a second."""
        while True:
            await asyncio.sleep(1.0)
            now = time.monotonic()
            for conn in list(self.connections):
                if conn.closing:
                    continue
                if conn.state != "connected":
                    if now - conn.connected_at > self.config.connect_timeout_s:
                        conn.protocol_error(Reason.MAXIMUM_CONNECT_TIME, "no CONNECT in time")
                elif conn.keep_alive and now - conn.last_rx > conn.keep_alive * 1.5:
                    conn.protocol_error(Reason.KEEP_ALIVE_TIMEOUT, "keep alive timeout")

    def snapshot(self) -> dict[str, Any]:
        s = self.stats
        return {
            "connections": len(self.connections),
            "sessions": len(self.sessions),
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
            "retained_messages": len(self.retained.messages),
            "retained_bytes": self.retained.bytes,
            "retained_refused": s.retained_refused,
            "topic_levels_refused": s.topic_levels_refused,
            "sessions_taken_over": s.sessions_taken_over,
            "tls_handshake_failures": sum(self.tls_failures.counts.values()),
            "login_failures": self.login_backoff.failures_total,
            "logins_delayed": self.login_backoff.delayed_total,
            "early_overflows": s.early_overflows,
            "queued_dropped": s.queued_dropped + sum(x.dropped for x in self.sessions.values()),
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
        return sorted((c.counters() for c in list(self.connections) if c.client_id),
                      key=lambda d: str(d["client_id"]))

    def log_connections(self) -> None:
        """Per-connection counters, one log line each (SIGUSR1)."""
        for conn in list(self.connections):
            log.info("connection", extra={"event": "connection_stats", **conn.counters()})


def _failed(fut: Any) -> bool:
    return bool(fut.done() and (fut.cancelled() or fut.exception() is not None))


def _consume(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()


def _user_props(r: Record) -> dict[str, Any] | None:
    """v5 properties of a downlink record (request/response headers, user properties)."""
    return record_properties(r)
