"""One device connection: bytes in -> packets -> actions, replies out (asyncio Protocol).

Everything on the hot path is synchronous: a PUBLISH is mapped and handed to the
producer in ``data_received``; the PUBACK is written from the producer future's
callback once the log acknowledged, in the order the PUBLISHes arrived (MQTT 4.6).
Output is gathered per event-loop turn and written with one ``writelines``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

from commonlib.latency import LatencyHistogram

from .codec import (
    MQTT_5,
    Ack,
    Auth,
    Connack,
    Connect,
    Disconnect,
    MqttError,
    PacketReader,
    PacketType,
    Pingreq,
    ProtocolViolation,
    Publish,
    Reason,
    Suback,
    SubOptions,
    Subscribe,
    TopicError,
    Unsuback,
    Unsubscribe,
    encode,
    puback,
    validate_filter,
    validate_topic,
)
from .codec.encoder import PINGRESP
from .config import BridgeConfig
from .kafka_producer import Producer
from .session import EMPTY_DICT, NO_QUEUE, PID_BYTES, OutMessage, Session, pid_bytes
from .stats import Stats

if TYPE_CHECKING:
    from .acl import Identity

log = logging.getLogger(__name__)

_HIGH_WATER = 256 * 1024
_PUBACK = bytes((PacketType.PUBACK << 4, 2))  # + packet id: a PUBACK with success
_PUBLISH = int(PacketType.PUBLISH)
_DENIALS_LOGGED = 5  # per connection; the rest are only counted


class FlushQueue:
    """The connections with output this event-loop turn, flushed by one callback.

    A fan-out gives thousands of connections output in the same turn: one scheduled
    callback for all of them instead of one each (a fifth of a 10,000-device fan-out's
    CPU went into scheduling and running those callbacks).
    """

    def __init__(self) -> None:
        self._conns: list[Connection] = []

    def add(self, conn: Connection) -> None:
        if not self._conns:
            asyncio.get_running_loop().call_soon(self._run)
        self._conns.append(conn)

    def _run(self) -> None:
        conns, self._conns = self._conns, []
        for conn in conns:
            conn._flush()  # noqa: SLF001 - the connection's own deferred flush


class SessionsApi(Protocol):
    """The session component as a connection uses it (``sessions.SessionManager``)."""

    def admit(self, conn: Connection) -> str | None: ...

    async def connect(self, conn: Connection, p: Connect) -> tuple[Reason, dict[str, Any], bool]: ...

    def after_connack(self, conn: Connection, present: bool) -> None: ...

    def detach(self, conn: Connection, *, abnormal: bool) -> None: ...

    def set_expiry(self, session: Session, expiry: int) -> None: ...

    def room_for(self, session: Session, topic_filter: str) -> bool: ...

    def subscribe(self, session: Session, topic_filter: str, opts: SubOptions, sub_id: int = 0) -> None: ...

    def after_subscribe(self, session: Session, granted: list[tuple[str, SubOptions, bool]]) -> None: ...

    def unsubscribe(self, session: Session, topic_filter: str) -> bool: ...

    def release_after_save(self, conn: Connection, session: Session, pid: int) -> None: ...


class AccessApi(Protocol):
    """Authorization as a connection asks it (``access.Access``)."""

    def may_publish(self, conn: Connection, topic: str) -> bool: ...

    def may_subscribe(self, conn: Connection, topic_filter: str) -> bool: ...


class UplinkApi(Protocol):
    """The uplink as a connection uses it (``uplink.Uplink``)."""

    @property
    def producer(self) -> Producer: ...

    def publish(
        self, conn: Connection | None, topic: str, payload: bytes, qos: int, retain: bool,
        props: dict[str, Any], client_id: str | None = None, qos2_nonce: str | None = None,
    ) -> asyncio.Future[int] | Reason: ...

    def publish_qos2(
        self, conn: Connection, session: Session, pid: int, topic: str, payload: bytes, retain: bool,
        props: dict[str, Any],
    ) -> asyncio.Future[Any] | Reason: ...

    def released(self, session: Session, pid: int) -> bool: ...


@dataclass
class ConnectionContext:
    """Everything a connection uses of the rest of the bridge, one object shared by all
    connections (the listeners make connections with it)."""

    config: BridgeConfig
    stats: Stats
    flushes: FlushQueue
    puback_latency: LatencyHistogram
    track: Callable[[asyncio.Task[Any]], None]
    sessions: SessionsApi
    access: AccessApi
    uplink: UplinkApi


class Connection(asyncio.Protocol):
    """The protocol object of one MQTT client connection."""

    # Slots: a fixed ~0.3 KB per connection. With an instance dict, CPython's shared-key
    # table overflowed as soon as a connection set an attribute first set outside
    # ``__init__`` (``will`` on CONNECT, say) and every idle device carried a dict of its
    # own, 0.8-1.3 KB more (issue 27; ``python -m benchmarks.idle_trace``).
    __slots__ = (
        "ctx", "tls", "identity", "publish_verdicts", "reader", "transport", "peer", "version",
        "client_id", "session", "keep_alive", "last_rx", "connected_at", "state", "closing",
        "send_quota", "topic_aliases", "_early", "out_aliases", "_out", "_out_bytes",
        "_flush_scheduled", "_acks", "msgs_in", "bytes_in", "msgs_out", "bytes_out", "denied",
        "paused_writing", "client_max_packet", "will", "clean_disconnect", "alias_max",
        "_reading_paused", "problem_information", "_early_bytes",
    )

    def __init__(self, ctx: ConnectionContext, *, tls: bool = False) -> None:
        self.ctx = ctx
        self.tls = tls
        self.identity: Identity | None = None
        self.publish_verdicts: dict[str, bool] = EMPTY_DICT
        cfg = ctx.config
        self.reader = PacketReader(cfg.max_packet_size)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.version = 4
        self.client_id: str | None = None
        self.session: Session | None = None
        self.keep_alive = 0
        self.last_rx = time.monotonic()
        self.connected_at = self.last_rx
        self.state = "new"  # new -> connecting -> connected -> closed
        self.closing = False
        self.send_quota = cfg.max_inflight
        self.topic_aliases: dict[int, str] = EMPTY_DICT
        #: packets (and an error) received while the CONNECT is processed; a list only then
        self._early: list[Any] | tuple[()] = ()
        #: bytes received while the CONNECT is processed (bounded: max_bytes_before_connack)
        self._early_bytes = 0
        self.denied = 0
        self.paused_writing = False
        self._reading_paused = False
        self.client_max_packet = 0
        self.will: Any = None
        self.clean_disconnect = False
        #: outbound topic aliases (v5): the client's Topic Alias Maximum (``out_aliases``: topic -> alias)
        self.alias_max = 0
        #: v5 Request Problem Information: 0 = reason strings only on CONNACK and DISCONNECT
        #: (MQTT 5 3.1.2.11.7)
        self.problem_information = True
        self.out_aliases: dict[str, int] = EMPTY_DICT
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._flush_scheduled = False
        #: [packet_id, qos, future, reason, received] per unacknowledged QoS 1/2 PUBLISH;
        #: the shared empty NO_QUEUE until the device first publishes with QoS > 0
        self._acks: deque[list[Any]] = NO_QUEUE
        # counters
        self.msgs_in = 0
        self.bytes_in = 0
        self.msgs_out = 0
        self.bytes_out = 0

    # ---- transport callbacks --------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream server's transport (uvloop's are not asyncio.Transport subclasses)
        self.transport = cast(asyncio.Transport, transport)
        self.transport.set_write_buffer_limits(high=_HIGH_WATER)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        reason = self.ctx.sessions.admit(self)
        if reason is not None:
            log.warning("refusing connection from %s: %s", self.peer, reason)
            self.closing = True
            self.transport.abort()

    @property
    def peer_host(self) -> str:
        """The address alone, for per-address limits (source_limits); from ``peer`` (one
        string per connection instead of two)."""
        return self.peer.rpartition(":")[0] or self.peer

    def _hold(self, item: Any) -> None:
        """Keep a packet or error that came before the CONNACK."""
        early = self._early
        if isinstance(early, list):
            early.append(item)
        else:
            self._early = [item]

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return
        self.last_rx = time.monotonic()
        self.bytes_in += len(data)
        self.ctx.stats.bytes_in += len(data)
        if self.state == "connecting":
            self._early_bytes += len(data)
            limit = self.ctx.config.max_bytes_before_connack
            if self._early_bytes > limit:
                self._early_overflow(f"more than {limit} bytes before CONNACK")
                return
        try:
            packets = self.reader.feed(data)
            for p in packets:
                if self.closing:
                    return
                if self.state == "connecting":
                    limit = self.ctx.config.max_packets_before_connack
                    if len(self._early) >= limit:
                        self._early_overflow(f"more than {limit} packets before CONNACK")
                        return
                    self._hold(p)
                else:
                    self._handle(p)
            if self.reader.error is not None and not self.closing:
                raise self.reader.error
        except MqttError as exc:
            if self.state == "connecting":
                self._hold(exc)  # reported after the CONNACK, as v5 expects
                if self.transport is not None:
                    self.transport.pause_reading()
            else:
                self.protocol_error(exc.reason, str(exc))

    def _early_overflow(self, why: str) -> None:
        """Too many packets or bytes before the CONNACK: stop reading; after the CONNACK
        the connection closes with 0x97 Quota exceeded (v5 reports errors only after it)."""
        if self.transport is not None:
            self.transport.pause_reading()
        if self._early and isinstance(self._early[-1], MqttError):
            return
        self.ctx.stats.early_overflows += 1
        self._hold(MqttError(Reason.QUOTA_EXCEEDED, why))

    def peer_certificate(self) -> dict[str, Any] | None:
        """The client's verified certificate (TLS listener with a CA), else None."""
        if self.transport is None:
            return None
        cert = self.transport.get_extra_info("peercert")
        return cert if isinstance(cert, dict) else None

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        was = self.state
        self.state = "closed"
        self.closing = True
        for entry in self._acks:
            fut = entry[2]
            if fut is not None:
                fut.remove_done_callback(self._on_logged)
        self._acks.clear()
        self.ctx.sessions.detach(self, abnormal=not self.clean_disconnect and was == "connected")

    def pause_writing(self) -> None:
        self.paused_writing = True

    def resume_writing(self) -> None:
        self.paused_writing = False
        if self.session is not None:
            self.session.pump()

    # ---- output ----------------------------------------------------------------------
    @property
    def backed_up(self) -> bool:
        return self.paused_writing or self._out_bytes > _HIGH_WATER

    def write(self, data: bytes) -> None:
        if self.closing:
            return
        self._out.append(data)
        self._out_bytes += len(data)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.ctx.flushes.add(self)

    def _flush(self) -> None:
        self._flush_scheduled = False
        out = self._out
        n = self._out_bytes
        self._out_bytes = 0
        if self.transport is None or self.transport.is_closing() or not out:
            out.clear()
            return
        self.bytes_out += n
        self.ctx.stats.bytes_out += n
        self.transport.writelines(out)
        # the same list again (the transport keeps none of it): a new one per flush was
        # 10,000 objects per notice for the garbage collector to find alive
        out.clear()
        s = self.session
        if s is not None and s.queue and not self.paused_writing:
            s.pump()

    def fits(self, msg: OutMessage, qos: int) -> bool:
        """Honour the client's Maximum Packet Size (v5): too-large messages are skipped."""
        return not self.client_max_packet or msg.size(self.version, qos) <= self.client_max_packet

    def _aliased(self, msg: OutMessage) -> OutMessage:
        """The message with a topic alias: the first time topic + alias, then alias only."""
        alias = self.out_aliases.get(msg.topic)
        topic = ""
        if alias is None:
            if len(self.out_aliases) >= self.alias_max:
                return msg  # all aliases taken: the full topic (no eviction)
            if self.out_aliases is EMPTY_DICT:
                self.out_aliases = {}
            alias = self.out_aliases[msg.topic] = len(self.out_aliases) + 1
            topic = msg.topic
        out = OutMessage(topic, msg.payload, {**(msg.properties or {}), "topic_alias": alias}, msg.tp, msg.offset)
        out.expires_at = msg.expires_at
        return out

    def send_publish(self, msg: OutMessage, qos: int, retain: bool, pid: int, dup: bool = False) -> None:
        if self.alias_max:
            msg = self._aliased(msg)
        head, tail = msg.parts(self.version, qos, retain, dup)
        if qos:
            self._out += (head, PID_BYTES.get(pid) or pid_bytes(pid), tail)
            size = len(head) + 2 + len(tail)
        else:
            self._out.append(head)
            size = len(head)
        self._out_bytes += size
        self.msgs_out += 1
        self.ctx.stats.msgs_out += 1
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.ctx.flushes.add(self)

    def send_pubrel(self, pid: int) -> None:
        self.write(puback(pid, PacketType.PUBREL))

    def close(self, reason: Reason | None = None, message: str = "") -> None:
        """Close; on MQTT 5 (after CONNACK) tell the client why with a DISCONNECT."""
        if self.closing or self.transport is None:
            return
        if reason is not None and self.version == MQTT_5 and self.state == "connected":
            props = {"reason_string": message[:200]} if message else {}
            self._out.append(encode(Disconnect(reason, props), MQTT_5))
        self._flush()
        self.closing = True
        self.transport.close()

    def protocol_error(self, reason: Reason, message: str) -> None:
        log.warning(
            "closing %s (client %s): %s (reason %#x)",
            self.peer, self.client_id, message, int(reason),
            extra={"event": "protocol_error", "client_id": self.client_id, "reason": int(reason)},
        )
        self.ctx.stats.protocol_errors += 1
        if self.state in ("new", "connecting") and reason == Reason.UNSUPPORTED_PROTOCOL_VERSION:
            # CONNACK return code 1 (3.1.1 form: a client with an unknown level reads that)
            self._out.append(b"\x20\x02\x00\x01")
        self.close(reason, message)

    # ---- packets -------------------------------------------------------------------------
    def _handle(self, p: Any) -> None:
        t = p.type
        if self.state != "connected":
            if t == PacketType.CONNECT and self.state == "new":
                self._on_connect(p)
                return
            raise ProtocolViolation("expected CONNECT first")
        if t == _PUBLISH:  # an int: an enum member's lookup cost more than the compare
            self._on_publish(p)
        elif t == PacketType.PUBACK:
            if self.session is not None:
                self.session.on_puback(p.packet_id)
        elif t == PacketType.PUBREL:
            known = self.session is not None and self.ctx.uplink.released(self.session, p.packet_id)
            # v5: PUBCOMP 0x92 for a packet id we hold nothing for (MQTT 5 3.7.2.1)
            self.write(puback(p.packet_id, PacketType.PUBCOMP,
                              Reason.SUCCESS if known else Reason.PACKET_IDENTIFIER_NOT_FOUND, self.version))
        elif t == PacketType.PUBREC:
            s = self.session
            if s is not None and p.reason < 0x80 and (p.packet_id in s.inflight) and s.persistent:
                s.on_pubrec(p.packet_id)
                # the PUBREL waits until the session says so in the log: after a crash
                # the bridge re-sends this PUBREL, never the PUBLISH (exactly once)
                self.ctx.sessions.release_after_save(self, s, p.packet_id)
            elif s is not None and p.reason < 0x80 and s.on_pubrec(p.packet_id):
                self.send_pubrel(p.packet_id)
            elif self.session is not None and p.reason >= 0x80:
                if self.session.inflight:
                    self.session.inflight.pop(p.packet_id, None)  # refused: the exchange ends
                self.session.pump()
            else:
                self.write(puback(p.packet_id, PacketType.PUBREL, Reason.PACKET_IDENTIFIER_NOT_FOUND,
                                  self.version))
        elif t == PacketType.PUBCOMP:
            if self.session is not None:
                self.session.on_puback(p.packet_id)
        elif t == PacketType.SUBSCRIBE:
            self._on_subscribe(p)
        elif t == PacketType.UNSUBSCRIBE:
            self._on_unsubscribe(p)
        elif t == PacketType.PINGREQ:
            self.write(PINGRESP)
        elif t == PacketType.DISCONNECT:
            self._on_disconnect(p)
        elif t == PacketType.CONNECT:
            raise ProtocolViolation("second CONNECT")
        elif isinstance(p, Auth):
            raise ProtocolViolation("AUTH without an authentication method")
        else:
            raise ProtocolViolation(f"unexpected {PacketType(t).name} from a client")

    def _on_connect(self, p: Connect) -> None:
        self.version = p.protocol_level
        if p.properties.get("request_problem_information") == 0:
            self.problem_information = False
        if p.will is not None:
            if self.version == MQTT_5 and "response_topic" in p.will.properties:
                try:
                    _check_response_topic(p.will.properties["response_topic"])
                except ProtocolViolation as exc:
                    self._out.append(encode(Connack(False, Reason.PROTOCOL_ERROR,
                                                    {"reason_string": str(exc)[:200]}), MQTT_5))
                    self.protocol_error(Reason.PROTOCOL_ERROR, f"will: {exc}")
                    return
            problem = self._bad_will_topic(p.will.topic)
            if problem is not None:
                # MQTT 4.7.1: a will topic is a topic name. v5 says why in the CONNACK;
                # 3.1.1 has no return code for it: a protocol violation, closed (4.8.0)
                if self.version == MQTT_5:
                    self._out.append(encode(Connack(False, Reason.TOPIC_NAME_INVALID,
                                                    {"reason_string": problem[:200]}), MQTT_5))
                self.protocol_error(Reason.TOPIC_NAME_INVALID, problem)
                return
        self.state = "connecting"
        task = asyncio.get_running_loop().create_task(self._connect(p))
        self.ctx.track(task)

    def _bad_will_topic(self, topic: str) -> str | None:
        try:
            validate_topic(topic)
        except TopicError as exc:
            return f"will topic: {exc}"
        if topic.count("/") >= self.ctx.config.max_topic_levels:
            return f"will topic has more than {self.ctx.config.max_topic_levels} levels"
        return None

    async def _connect(self, p: Connect) -> None:
        try:
            reason, props, present = await self.ctx.sessions.connect(self, p)
        except Exception:  # noqa: BLE001 - never leave a client hanging without CONNACK
            log.exception("CONNECT from %s failed", self.peer)
            reason, props, present = Reason.SERVER_UNAVAILABLE, {}, False
        if self.closing:
            return
        if reason != Reason.SUCCESS and self.version == MQTT_5 and "reason_string" not in props:
            props = {**props, "reason_string": Reason(reason).name.replace("_", " ").lower()}
        self.write(encode(Connack(present, reason, props), self.version))
        if reason != Reason.SUCCESS:
            self._flush()
            self.closing = True
            if self.transport is not None:
                self.transport.close()
            return
        self.state = "connected"
        self.ctx.sessions.after_connack(self, present)
        early, self._early = self._early, ()
        try:
            for q in early:
                if self.closing:
                    break
                if isinstance(q, MqttError):
                    raise q
                self._handle(q)
        except MqttError as exc:
            self.protocol_error(exc.reason, str(exc))

    def _on_publish(self, p: Publish) -> None:
        self.msgs_in += 1
        self.ctx.stats.msgs_in += 1
        topic = p.topic
        props = p.properties
        if self.version == MQTT_5 and props:
            if "subscription_identifier" in props:  # MQTT 5 3.3.4: only the server sends them
                raise ProtocolViolation("subscription identifier in a client's PUBLISH")
            if "response_topic" in props:
                _check_response_topic(props["response_topic"])
            alias = props.get("topic_alias")
            if alias is not None:
                if alias > self.ctx.config.topic_alias_maximum:
                    raise MqttError(Reason.TOPIC_ALIAS_INVALID, f"topic alias {alias} out of range")
                if topic:
                    if self.topic_aliases is EMPTY_DICT:
                        self.topic_aliases = {}
                    self.topic_aliases[alias] = topic
                else:
                    topic = self.topic_aliases.get(alias, "")
                    if not topic:
                        raise ProtocolViolation(f"unknown topic alias {alias}")
        # A topic with a verdict was checked before (verdicts are kept only for valid
        # names): a device's every message after its first skips the checks.
        allowed = self.publish_verdicts.get(topic)
        if allowed is None:
            try:
                validate_topic(topic)
            except TopicError as exc:
                raise MqttError(Reason.TOPIC_NAME_INVALID, str(exc)) from None
            if topic.count("/") >= self.ctx.config.max_topic_levels:
                self.ctx.stats.topic_levels_refused += 1
                raise MqttError(Reason.TOPIC_NAME_INVALID,
                                f"topic name has more than {self.ctx.config.max_topic_levels} levels")
            allowed = self.ctx.access.may_publish(self, topic)
        qos = p.qos
        session = self.session
        assert session is not None
        if (qos and self.version == MQTT_5
                and len(self._acks) + len(session.qos2_in) >= self.ctx.config.receive_maximum
                and self._over_receive_maximum(qos, p.packet_id)):
            raise MqttError(Reason.RECEIVE_MAXIMUM_EXCEEDED, "too many unacknowledged PUBLISHes")
        if not allowed:
            result: Any = Reason.NOT_AUTHORIZED
        elif qos == 2:
            result = self.ctx.uplink.publish_qos2(self, session, p.packet_id, topic, p.payload, p.retain, props)
        else:
            result = self.ctx.uplink.publish(self, topic, p.payload, qos, p.retain, props)
        if isinstance(result, asyncio.Future):
            if qos == 0:
                return
            acks = self._acks
            if acks is NO_QUEUE:
                acks = self._acks = deque()
            # A produce batch's records share one future: one callback per run of them.
            if not acks or acks[-1][2] is not result:
                result.add_done_callback(self._on_logged)
            acks.append([p.packet_id, qos, result, None, time.perf_counter()])
            producer = self.ctx.uplink.producer
            if (producer.buffered >= producer.buffer_bytes and not self._reading_paused
                    and self.transport is not None):  # producer.full, without the call
                self._reading_paused = True
                self.transport.pause_reading()
                producer.when_space(self._resume_reading)
            return
        if result == Reason.NOT_AUTHORIZED:
            self._denied("publish", topic)
        if qos:
            if self._acks is NO_QUEUE:
                self._acks = deque()
            self._acks.append([p.packet_id, qos, None, result, time.perf_counter()])
            self._drain_acks()

    def _over_receive_maximum(self, qos: int, pid: int) -> bool:
        """Would this PUBLISH exceed our Receive Maximum? A QoS 1 PUBLISH counts until its
        PUBACK, a QoS 2 one until its PUBCOMP (MQTT 5 4.9); a QoS 2 packet id already
        awaiting PUBREL is the same message again and takes no more room."""
        session = self.session
        assert session is not None
        if qos == 2 and pid in session.qos2_in:
            return False
        pending = sum(1 for entry in self._acks if entry[1] == 1) + len(session.qos2_in)
        return pending >= self.ctx.config.receive_maximum

    def _resume_reading(self) -> None:
        self._reading_paused = False
        if self.transport is not None and not self.closing:
            self.transport.resume_reading()

    def _on_logged(self, fut: asyncio.Future[int]) -> None:
        self._drain_acks()
        # Every PUBACK this write made ready is here: out now, not a loop turn later
        # (the flush queue then finds nothing left to write).
        if self._out and not self.paused_writing:
            self._flush()

    def _drain_acks(self) -> None:
        """Acknowledge, in arrival order, every PUBLISH whose log write has finished."""
        acks = self._acks
        # the common case first: QoS 1 written to the log, plain 4-byte PUBACKs in one go
        out = self._out
        n = 0
        now = time.perf_counter()
        observe = self.ctx.puback_latency.observe
        while acks:
            entry = acks[0]
            fut = entry[2]
            if (fut is None or entry[1] != 1 or not fut.done() or fut.cancelled()
                    or fut.exception() is not None):
                break
            acks.popleft()
            out += (_PUBACK, PID_BYTES.get(entry[0]) or pid_bytes(entry[0]))
            observe(now - entry[4])
            n += 1
        if n:
            self._out_bytes += 4 * n
            if not self._flush_scheduled:
                self._flush_scheduled = True
                self.ctx.flushes.add(self)
        while acks:
            entry = acks[0]
            fut = entry[2]
            if fut is not None:
                if not fut.done():
                    return
                reason = Reason.SUCCESS
                if fut.cancelled() or fut.exception() is not None:
                    exc = None if fut.cancelled() else fut.exception()
                    if self.version != MQTT_5:
                        acks.clear()
                        self.protocol_error(
                            Reason.UNSPECIFIED_ERROR, f"log write failed, no way to NACK in 3.1.1: {exc}"
                        )
                        return
                    reason = Reason.UNSPECIFIED_ERROR
            else:
                reason = entry[3]
                if reason == Reason.NOT_AUTHORIZED and self.version != MQTT_5:
                    # 3.1.1 has no negative PUBACK: acknowledge and drop, as mosquitto does
                    # (closing would only make the client reconnect and send it again)
                    reason = Reason.SUCCESS
                elif reason >= 0x80 and self.version != MQTT_5:
                    acks.clear()
                    self.protocol_error(Reason(reason), "PUBLISH refused, no way to NACK in 3.1.1")
                    return
            acks.popleft()
            pid, qos = entry[0], entry[1]
            if qos == 2 and reason >= 0x80 and self.session is not None and self.session.qos2_in:
                self.session.qos2_in.pop(pid, None)  # refused: the exchange ends here
            kind = PacketType.PUBACK if qos == 1 else PacketType.PUBREC
            self.ctx.puback_latency.observe(time.perf_counter() - entry[4])
            if reason >= 0x80 and self.version == MQTT_5:
                props = {"reason_string": _why(reason)} if self.problem_information else {}
                self.write(encode(Ack(kind, pid, reason, props), MQTT_5))
            else:
                self.write(puback(pid, kind, reason, self.version))

    def _on_subscribe(self, p: Subscribe) -> None:
        reasons: list[int] = []
        session = self.session
        assert session is not None
        granted_new: list[tuple[str, SubOptions, bool]] = []
        sub_id = p.properties.get("subscription_identifier", 0) if self.version == MQTT_5 else 0
        if isinstance(sub_id, list):
            raise ProtocolViolation("more than one subscription identifier in SUBSCRIBE")
        for topic_filter, opts in p.topics:
            try:
                validate_filter(topic_filter)
            except TopicError:
                reasons.append(Reason.TOPIC_FILTER_INVALID if self.version == MQTT_5 else 0x80)
                continue
            if topic_filter.count("/") >= self.ctx.config.max_topic_levels:
                self.ctx.stats.topic_levels_refused += 1
                log.warning("client %s: filter with more than %d levels refused", self.client_id,
                            self.ctx.config.max_topic_levels,
                            extra={"event": "topic_levels_refused", "client_id": self.client_id})
                reasons.append(Reason.TOPIC_FILTER_INVALID if self.version == MQTT_5 else 0x80)
                continue
            if topic_filter.startswith("$share/") and opts.no_local and self.version == MQTT_5:
                raise ProtocolViolation("no local on a shared subscription")
            if not self.ctx.access.may_subscribe(self, topic_filter):
                self._denied("subscribe", topic_filter)
                reasons.append(Reason.NOT_AUTHORIZED if self.version == MQTT_5 else 0x80)
                continue
            if (
                topic_filter not in session.subs
                and len(session.subs) >= self.ctx.config.max_subscriptions
            ):
                reasons.append(Reason.QUOTA_EXCEEDED if self.version == MQTT_5 else 0x80)
                continue
            if not self.ctx.sessions.room_for(session, topic_filter):
                log.warning("client %s: subscription %r refused, the session would exceed "
                            "max_session_bytes", self.client_id, topic_filter[:100])
                reasons.append(Reason.QUOTA_EXCEEDED if self.version == MQTT_5 else 0x80)
                continue
            existed = topic_filter in session.subs
            self.ctx.sessions.subscribe(session, topic_filter, opts, sub_id)
            reasons.append(opts.qos)
            granted_new.append((topic_filter, opts, existed))
        props: dict[str, Any] = {}
        refused = sorted({r for r in reasons if r >= 0x80})
        if refused and self.version == MQTT_5 and self.problem_information:
            props["reason_string"] = "; ".join(_why(r) for r in refused)
        self.write(encode(Suback(p.packet_id, reasons, props), self.version))
        self.ctx.sessions.after_subscribe(session, granted_new)

    def _denied(self, what: str, topic: str) -> None:
        stats = self.ctx.stats
        if what == "publish":
            stats.denied_publish += 1
        else:
            stats.denied_subscribe += 1
        self.denied += 1
        if self.denied <= _DENIALS_LOGGED:
            log.warning(
                "not authorized: %s %r by client %r (user %r) from %s%s", what, topic,
                self.client_id, self.identity.username if self.identity else None, self.peer,
                "; further denials of this connection are only counted" if self.denied == _DENIALS_LOGGED else "",
                extra={"event": "denied_" + what, "client_id": self.client_id, "topic": topic},
            )

    def _on_unsubscribe(self, p: Unsubscribe) -> None:
        session = self.session
        assert session is not None
        reasons: list[int] = []
        for topic_filter in p.topics:
            try:
                validate_filter(topic_filter)
            except TopicError as exc:
                if self.version != MQTT_5:  # no reason codes in 3.1.1: a protocol violation
                    raise ProtocolViolation(f"UNSUBSCRIBE: {exc}") from None
                reasons.append(Reason.TOPIC_FILTER_INVALID)
                continue
            found = self.ctx.sessions.unsubscribe(session, topic_filter)
            reasons.append(Reason.SUCCESS if found else Reason.NO_SUBSCRIPTION_EXISTED)
        props: dict[str, Any] = {}
        if Reason.TOPIC_FILTER_INVALID in reasons and self.problem_information:
            props["reason_string"] = _why(Reason.TOPIC_FILTER_INVALID)
        self.write(encode(Unsuback(p.packet_id, reasons, props), self.version))

    def _on_disconnect(self, p: Disconnect) -> None:
        if self.version == MQTT_5:
            expiry = p.properties.get("session_expiry_interval")
            if expiry is not None and self.session is not None:
                if self.session.expiry_interval == 0 and expiry:
                    raise ProtocolViolation("session expiry set on DISCONNECT after 0 on CONNECT")
                self.ctx.sessions.set_expiry(self.session, expiry)
        if p.reason != Reason.DISCONNECT_WITH_WILL:
            self.will = None
        self.clean_disconnect = p.reason != Reason.DISCONNECT_WITH_WILL
        self.closing = True
        if self.transport is not None:
            self._flush_now()
            self.transport.close()

    def _flush_now(self) -> None:
        if self._out and self.transport is not None:
            self.transport.writelines(self._out)
        self._out = []
        self._out_bytes = 0

    def counters(self) -> dict[str, Any]:
        return {
            "client_id": self.client_id,
            "peer": self.peer,
            "msgs_in": self.msgs_in,
            "bytes_in": self.bytes_in,
            "msgs_out": self.msgs_out,
            "bytes_out": self.bytes_out,
            "denied": self.denied,
            "connected_s": round(time.monotonic() - self.connected_at, 1),
        }


def _check_response_topic(topic: str) -> None:
    """A Response Topic is a topic name (MQTT 5 3.3.2.3.5: no wildcards, not empty)."""
    try:
        validate_topic(topic)
    except TopicError as exc:
        raise ProtocolViolation(f"response topic: {exc}") from None


def _why(reason: int) -> str:
    """A v5 reason string: the reason code's name, readable."""
    try:
        return Reason(reason).name.replace("_", " ").lower()
    except ValueError:
        return f"reason {reason:#x}"


# Pingreq is imported for type completeness of the dispatcher.
_ = Pingreq
