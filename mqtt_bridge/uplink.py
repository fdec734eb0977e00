"""Uplink: a device's PUBLISH to the log, or to local subscribers; QoS 2; wills.

``publish`` maps a device topic to (Kafka topic, key) and hands the record to the
batching producer; QoS 1 is acknowledged by the connection when the producer's future
resolves (acks=all). Unmapped topics are routed between MQTT clients locally. A QoS 2
PUBLISH becomes exactly one record (``publish_qos2``). Retained PUBLISHes also go to
the retention component, and a connection's will is published here when it is due.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, cast

from commonlib.kafkaclient import KafkaClient, KafkaError

from .codec import MQTT_5, Reason
from .config import BridgeConfig
from .connection import Connection
from .kafka_fetcher import LATEST, Fetcher
from .kafka_producer import Producer, headers_size
from .mapping import ROUTE_CACHE_SIZE, Mapping, UplinkTopics, valid_kafka_topic
from .record_headers import property_headers, user_property_header
from .retention import Retention
from .session import EMPTY_DICT, OutMessage, Qos2In, Session
from .session_store import PERMANENT_ERRORS
from .stats import Stats
from .subscriptions import SubscriptionIndex

log = logging.getLogger(__name__)

NEVER = 0xFFFFFFFF
#: v5 PUBLISH properties forwarded to local subscribers (the rest are per hop).
_FORWARDED = ("payload_format_indicator", "message_expiry_interval", "content_type",
              "response_topic", "correlation_data", "user_property")


class StateWriter(Protocol):
    """What QoS 2 needs of session persistence: save a session's state now."""

    @property
    def stored(self) -> bool: ...

    async def write_state(self, session: Session) -> None: ...


class Uplink:
    """Routes PUBLISHes (and wills) from devices to the log and to local subscribers."""

    def __init__(
        self, config: BridgeConfig, mapping: Mapping, stats: Stats, client: KafkaClient,
        producer: Producer, fetcher: Fetcher, retention: Retention, index: SubscriptionIndex,
        states: StateWriter,
    ) -> None:
        self._config = config
        self._mapping = mapping
        self._stats = stats
        self._client = client
        self.producer = producer
        self._fetcher = fetcher
        self._retention = retention
        self._index = index
        self._states = states
        self._allowed = UplinkTopics(
            config.uplink_topics,
            {r.kafka_topic for r in mapping.downlink} | {config.session_topic, config.retained_topic},
        )
        #: Kafka topics written so far (checked once each)
        self.topics: set[str] = set()
        #: MQTT topic -> (client id, its two record headers, their size for the producer)
        self._headers: dict[str, tuple[str, tuple[tuple[str, bytes | None], ...], int]] = {}
        #: client id -> (timer, publish now) of a will waiting for its delay (v5)
        self._will_timers: dict[str, tuple[asyncio.TimerHandle, Callable[[], None]]] = {}
        self._log_down_warned = 0.0

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
        if retain and payload and not self._retention.fits(topic, payload):
            self._retention.refused(topic)
            if conn is not None and conn.version == MQTT_5:
                return Reason.QUOTA_EXCEEDED  # v5: PUBACK/PUBREC 0x97, nothing written
            retain = False  # 3.1.1 (no negative ack) and wills: delivered, not retained
        route = self._mapping.route_up(topic)
        if route is None:
            if retain:
                self._retention.retain(topic, payload, fwd, qos)
            self._route_local(conn, topic, payload, qos, retain, fwd)
            return Reason.SUCCESS
        ktopic, key = route
        refusal = self._check_uplink(ktopic)
        if refusal is not None:
            return refusal
        if retain:
            self._retention.retain(topic, payload, fwd, qos)
        # a device sends to the same topic again and again: its two headers, encoded once
        known = self._headers.get(topic)
        if known is None or known[0] != cid:
            if len(self._headers) >= ROUTE_CACHE_SIZE:
                self._headers.clear()
            both = (("mqtt.topic", topic.encode()), ("mqtt.client_id", cid.encode()))
            known = self._headers[topic] = (cid, both, headers_size(both))
        headers: Sequence[tuple[str, bytes | None]] = known[1]
        self._stats.uplink_records += 1
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
        if ktopic in self.topics:  # checked before: no regex per message
            return None
        if not valid_kafka_topic(ktopic):
            return Reason.TOPIC_NAME_INVALID
        if ktopic not in self.topics:
            if not self._allowed.permits(ktopic):
                return Reason.NOT_AUTHORIZED  # not in uplink_topics (the connection logs it)
            if len(self.topics) >= self._config.max_topics:
                return Reason.QUOTA_EXCEEDED
            self.topics.add(ktopic)
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
        if retain and payload and conn.version == MQTT_5 and not self._retention.fits(topic, payload):
            self._retention.refused(topic)
            return Reason.QUOTA_EXCEEDED  # PUBREC 0x97 before anything is saved or written
        route = self._mapping.route_up(topic)
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
        if session.persistent and self._states.stored:
            await self._while_log_down("QoS 2 bookkeeping", lambda: self._qos2_mark(session, entry))
        result = self.publish(conn, topic, payload, 2, retain, props, qos2_nonce=entry.nonce)
        if isinstance(result, asyncio.Future):
            await result
        elif result >= 0x80:
            raise KafkaError(f"refused: {result!r}")

    async def _qos2_mark(self, session: Session, entry: Qos2In) -> None:
        """Where the record will land (end offsets now) and the nonce, saved with the session."""
        meta = await self._client.partitions(entry.ktopic)
        ends = await self._client.list_offsets([(entry.ktopic, p) for p in meta.partitions], LATEST)
        entry.starts = {p: o for (_t, p), o in ends.items()}
        await self._states.write_state(session)

    async def _while_log_down(self, what: str, step: Callable[[], Awaitable[Any]]) -> None:
        """Run ``step``, retrying a log that does not answer (restarting) as the producer
        retries a write: up to ``--delivery-timeout-s``, pausing 0.1 s growing to 1 s."""
        deadline = time.monotonic() + self._config.delivery_timeout_s
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
            await self._client.partitions(entry.ktopic)
            ends = await self._client.list_offsets(tps, LATEST)
            for tp in tps:
                async for _nxt, records in self._fetcher.fetch_range(tp, entry.starts[tp[1]], ends[tp]):
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

    # ---- local routing --------------------------------------------------------------------
    def _route_local(
        self, conn: Connection | None, topic: str, payload: bytes, qos: int, retain: bool,
        props: dict[str, Any] | None,
    ) -> None:
        matches, shared = self._index.match_copies(topic)
        if not matches and not shared:
            return
        self._stats.local_routed += 1
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
            _deliver_local(session, msg, min(qos, opts.qos), retain and opts.retain_as_published, ids)
        for session, opts, name in shared:
            ids = [session.sub_ids[name]] if name in session.sub_ids else []
            _deliver_local(session, msg, min(qos, opts.qos), retain and opts.retain_as_published, ids)

    # ---- wills ----------------------------------------------------------------------------
    def settle_will(self, cid: str, *, session_ends: bool) -> None:
        """A new connection for ``cid``: a will waiting for its delay is cancelled, or sent
        now when that connection's Clean Start ends the session (MQTT 5 3.1.2.5)."""
        pending = self._will_timers.pop(cid, None)
        if pending is not None:
            pending[0].cancel()
            if session_ends:
                pending[1]()

    def publish_will(self, conn: Connection, session: Session | None = None) -> None:
        """The connection ended abnormally: its will goes now, or after its delay."""
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


def _deliver_local(session: Session, msg: OutMessage, qos: int, retain: bool, ids: list[int] | None) -> None:
    if session.conn is None:
        if session.persistent and qos:
            # an offline persistent session keeps QoS 1/2 messages for its return,
            # in memory (up to --max-queued; not across a bridge restart)
            session.enqueue(msg, qos, retain, ids)
        return
    session.enqueue(msg, qos, retain, ids)
    session.pump()


def _failed(fut: Any) -> bool:
    return bool(fut.done() and (fut.cancelled() or fut.exception() is not None))


def _consume(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()
