"""MQTT sessions: subscriptions, outgoing queue, in-flight window, resume offsets.

Delivery is pull-by-window: a message waits in the session's queue until the
connection has room (in-flight QoS 1 below the client's receive maximum, socket not
backed up), so a slow or dead device only ever fills its own queue.

Resume offsets (persistent sessions): for every downlink partition the session
follows, the offset from which a reconnect must re-read the log. It is the smallest
offset still queued or unacknowledged for this session, or else the position the
fetcher (or this session's catch-up) has dispatched up to.
"""

from __future__ import annotations

import logging
import math
import struct
import time
from collections import deque
from types import MappingProxyType
from typing import Any, Protocol

from commonlib.kafkaclient import TopicPartition

from .codec import MQTT_5, SubOptions, publish_parts, topic_matches

log = logging.getLogger(__name__)

#: packet id -> its two bytes, each made on first use (``PID_BYTES.get(pid) or pid_bytes(pid)``):
#: all 65,536 made up front were 2.8 MB, and a fan-out device only ever uses a few; a dict,
#: not a list of 65,536 slots (0.5 MB in every idle bridge: issue 27)
PID_BYTES: dict[int, bytes] = {}


def pid_bytes(pid: int) -> bytes:
    """The packet id's two bytes, kept in ``PID_BYTES`` from now on."""
    b = PID_BYTES[pid] = struct.pack(">H", pid)
    return b


#: The value of a per-session (or per-connection) dict nothing was written to yet: shared,
#: read-only (a write raises), replaced by a dict of its own on the first write. An empty
#: dict is 64 bytes; a device carried a dozen such that most never use.
EMPTY_DICT: dict[Any, Any] = MappingProxyType({})  # type: ignore[assignment]

#: ``Session.released`` of every session with no QoS 2 message awaiting PUBCOMP (an empty
#: set is 216 bytes); frozen, so nothing can be added to the shared one by mistake
_NO_PIDS: frozenset[int] = frozenset()


class _NoQueue(deque):
    """The queue of every session with nothing queued: shared, and it refuses to grow.

    An empty deque is 760 bytes; 10,000 idle devices paid 7.6 MB for theirs. A session
    gets a deque of its own when something has to wait (``Session.own_queue``) and
    gives it back once the queue has drained.
    """

    __slots__ = ()

    def append(self, _item: Any) -> None:
        raise TypeError("the shared empty queue: append through Session.own_queue()")

    appendleft = extend = extendleft = append

    def insert(self, _i: int, _item: Any) -> None:
        self.append(_item)


NO_QUEUE: deque[Any] = _NoQueue()


class _NoHeld(list[Any]):
    """``Session.held`` of every session with nothing held back: shared, refuses to grow."""

    __slots__ = ()

    def append(self, _item: Any) -> None:
        raise TypeError("the shared empty list: append through Session.own_held()")

    def extend(self, _items: Any) -> None:
        self.append(_items)

    def insert(self, _i: Any, _item: Any) -> None:
        self.append(_item)


NO_HELD: list[Any] = _NoHeld()


class OutMessage:
    """One downlink message; its encodings are made once and shared by all receivers."""

    __slots__ = ("topic", "payload", "properties", "tp", "offset", "expires_at", "_enc")

    def __init__(
        self,
        topic: str,
        payload: bytes,
        properties: dict[str, Any] | None = None,
        tp: TopicPartition | None = None,
        offset: int = -1,
    ) -> None:
        self.topic = topic
        self.payload = payload
        self.properties = properties
        self.tp = tp
        self.offset = offset
        #: wall clock end of a v5 message expiry interval; None = never
        self.expires_at: float | None = None
        if properties and "message_expiry_interval" in properties:
            self.expires_at = time.time() + properties["message_expiry_interval"]
        self._enc: dict[tuple[int, int, bool, bool], tuple[bytes, bytes]] = {}

    def derived(self, **props: Any) -> OutMessage:
        """A copy with some properties changed (own encodings; same log position, same end)."""
        msg = OutMessage(self.topic, self.payload, {**(self.properties or {}), **props}, self.tp, self.offset)
        msg.expires_at = self.expires_at
        return msg

    def parts(self, version: int, qos: int, retain: bool, dup: bool = False) -> tuple[bytes, bytes]:
        """(head, tail) of the PUBLISH; see ``codec.publish_parts``."""
        v = MQTT_5 if version == MQTT_5 else 4
        key = (v, qos, retain, dup)
        enc = self._enc.get(key)
        if enc is None:
            head, tail = publish_parts(
                self.topic, self.payload, qos, retain, v, self.properties if v == MQTT_5 else None, dup
            )
            if qos == 0:
                head, tail = head + tail, b""
            enc = self._enc[key] = (head, tail)
        return enc

    def size(self, version: int, qos: int) -> int:
        head, tail = self.parts(version, qos, False)
        return len(head) + len(tail) + (2 if qos else 0)


Delivery = tuple[OutMessage, int, bool]  # message, qos, retain flag


class Qos2In:
    """An inbound QoS 2 PUBLISH between its arrival and the client's PUBREL.

    ``nonce`` rides in the record's ``mqtt.qos2`` header and ``starts`` (partition ->
    log end offset before the write) are saved with the session before the record is
    written, so after a bridge crash a re-sent PUBLISH is looked up in the log instead
    of being written twice. ``future`` resolves once the record is in the log; None
    for an entry loaded from the store (outcome unknown until looked up).
    """

    __slots__ = ("nonce", "ktopic", "starts", "future")

    def __init__(self, nonce: str, ktopic: str, starts: dict[int, int] | None = None) -> None:
        self.nonce = nonce
        self.ktopic = ktopic
        self.starts: dict[int, int] = starts or {}
        self.future: Any = None


class Outlet(Protocol):
    """What a session needs of its connection (``connection.Connection``): room in the
    window and on the socket, and the two packets it sends."""

    closing: bool
    send_quota: int

    @property
    def backed_up(self) -> bool: ...

    def fits(self, msg: OutMessage, qos: int) -> bool: ...

    def send_publish(self, msg: OutMessage, qos: int, retain: bool, pid: int, dup: bool = False) -> None: ...

    def send_pubrel(self, pid: int) -> None: ...


class Session:
    """State that outlives a connection when the session is persistent.

    Slots, and the shared read-only ``EMPTY_DICT`` / ``NO_QUEUE`` / ``NO_HELD`` for
    every collection until it is first written: an idle device's session is one object
    (issue 27; its dicts, list and instance dict were ~0.5 KB of a device's 3.5 KiB).
    """

    __slots__ = (
        "client_id", "persistent", "expiry_interval", "subs", "sub_ids", "expired", "conn",
        "queue", "inflight", "qos2_in", "released", "redeliver", "save_failures", "retry_at",
        "max_queued", "dropped", "_next_pid", "offsets", "catchup_pos", "gaps", "holding",
        "held", "epoch", "refill", "dirty", "expiry_handle",
    )

    def __init__(self, client_id: str, *, max_queued: int = 1000) -> None:
        self.client_id = client_id
        self.persistent = False
        self.expiry_interval = 0  # seconds; 0xFFFFFFFF = never
        #: filter -> options; EMPTY_DICT until the first SUBSCRIBE (``own_subs``)
        self.subs: dict[str, SubOptions] = EMPTY_DICT
        #: v5 subscription identifiers by filter (only filters that have one)
        self.sub_ids: dict[str, int] = EMPTY_DICT
        self.expired = 0  # messages dropped because their message expiry passed
        self.conn: Outlet | None = None
        #: waiting messages; NO_QUEUE (shared, empty) until something has to wait
        self.queue: deque[Delivery] = NO_QUEUE
        #: packet id -> delivery awaiting PUBACK/PUBREC; EMPTY_DICT until the first one
        self.inflight: dict[int, Delivery] = EMPTY_DICT
        #: inbound QoS 2 packet ids awaiting PUBREL
        self.qos2_in: dict[int, Qos2In] = EMPTY_DICT
        #: outbound QoS 2 packet ids PUBREC'd by the client, PUBREL sent, awaiting PUBCOMP
        self.released: set[int] = _NO_PIDS  # type: ignore[assignment]  # a set once used
        #: (kafka topic, partition, offset) -> (packet id, qos) of messages that were in
        #: flight when the client left: re-read from the log, they go out with the same
        #: packet id and the DUP flag
        self.redeliver: dict[tuple[str, int, int], tuple[int, int]] = EMPTY_DICT
        self.save_failures = 0
        self.retry_at = 0.0
        self.max_queued = max_queued
        self.dropped = 0
        self._next_pid = 1
        #: partitions followed -> resume offset while offline (set on detach/load)
        self.offsets: dict[TopicPartition, int] = EMPTY_DICT
        #: partitions being caught up -> next offset the catch-up will read
        self.catchup_pos: dict[TopicPartition, int] = EMPTY_DICT
        #: lowest offset dropped from a full queue, re-read later (at least once)
        self.gaps: dict[TopicPartition, int] = EMPTY_DICT
        self.holding = False  # True while a catch-up is running: live messages wait
        #: live messages held back during a catch-up; NO_HELD until one is (``own_held``)
        self.held: list[Delivery] = NO_HELD
        self.epoch = 0  # bumped on every attach/detach; stale catch-ups stop
        self.refill: Any = None  # callback(session) when the queue drains and gaps exist
        self.dirty = False
        self.expiry_handle: Any = None

    @property
    def online(self) -> bool:
        return self.conn is not None

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other

    # ---- delivery -----------------------------------------------------------------
    def personal(self, msg: OutMessage) -> OutMessage:
        """The copy of the message its non-shared subscriptions give: with the identifiers
        of all of them that match (MQTT 5 3.3.4; a shared subscription's copy is separate)."""
        if not self.sub_ids:
            return msg
        topic = msg.topic
        ids = sorted(i for f, i in self.sub_ids.items() if not f.startswith("$share/") and topic_matches(f, topic))
        return self.with_ids(msg, ids)

    @staticmethod
    def with_ids(msg: OutMessage, ids: list[int]) -> OutMessage:
        if not ids:
            return msg
        return msg.derived(subscription_identifier=ids if len(ids) > 1 else ids[0])

    def own_copy(self, topic: str) -> tuple[SubOptions, list[int]] | None:
        """Options and identifiers of this session's non-shared subscriptions that take a
        message it published itself (no-local ones do not: MQTT 5 3.8.3.1); None if none."""
        qos = -1
        rap = False
        ids: list[int] = []
        for f, o in self.subs.items():
            if o.no_local or f.startswith("$share/") or not topic_matches(f, topic):
                continue
            qos = max(qos, o.qos)
            rap = rap or o.retain_as_published
            i = self.sub_ids.get(f)
            if i:
                ids.append(i)
        if qos < 0:
            return None
        return SubOptions(qos, False, rap), sorted(ids)

    def own_subs(self) -> dict[str, SubOptions]:
        """The session's subscriptions, to write to (a dict of its own from now on)."""
        subs = self.subs
        if subs is EMPTY_DICT:
            subs = self.subs = {}
        return subs

    def own_offsets(self) -> dict[TopicPartition, int]:
        """The resume offsets, to write to (a dict of its own from now on)."""
        offsets = self.offsets
        if offsets is EMPTY_DICT:
            offsets = self.offsets = {}
        return offsets

    def _own_inflight(self) -> dict[int, Delivery]:
        inflight = self.inflight
        if inflight is EMPTY_DICT:
            inflight = self.inflight = {}
        return inflight

    def own_held(self) -> list[Delivery]:
        held = self.held
        if held is NO_HELD:
            held = self.held = []
        return held

    def own_queue(self) -> deque[Delivery]:
        """The session's queue, to append to (a deque of its own from now on)."""
        queue = self.queue
        if queue is NO_QUEUE:
            queue = self.queue = deque()
        return queue

    def enqueue(self, msg: OutMessage, qos: int, retain: bool = False, ids: list[int] | None = None) -> None:
        """Queue a copy: ``ids`` None = the non-shared subscriptions' copy (their
        identifiers added here), else exactly these identifiers (the caller knows which
        subscription gives the copy)."""
        if ids is None:
            if self.sub_ids:
                msg = self.personal(msg)
        elif ids:
            msg = self.with_ids(msg, ids)
        target = self.own_held() if self.holding else self.own_queue()
        if len(target) >= self.max_queued:
            self.dropped += 1
            if msg.tp is not None and self.persistent and qos:
                prev = self.gaps.get(msg.tp)
                if prev is None or msg.offset < prev:
                    if self.gaps is EMPTY_DICT:
                        self.gaps = {}
                    self.gaps[msg.tp] = msg.offset
            if self.dropped in (1, 10, 100) or self.dropped % 1000 == 0:
                log.warning(
                    "session %s: queue full (%d), %d messages dropped",
                    self.client_id, self.max_queued, self.dropped,
                )
            return
        target.append((msg, qos, retain))

    def deliver(self, delivery: Delivery) -> bool:
        """``enqueue`` then ``pump``, for a live message; False: it was queued, pump later.

        The fan-out path: a session with nothing waiting whose connection has room takes
        the message straight to its connection, without a queue entry (10,000 devices
        meant 10,000 deques made and freed per notice, and the garbage collector runs
        they caused). Anything unusual (a queue, a catch-up, subscription identifiers,
        an expiry, re-deliveries, gaps, a full window or socket) goes the queued way.
        ``delivery`` (message, qos, retain) is kept in ``inflight`` as it is: one tuple
        shared by every session that gets the message at that QoS.
        """
        msg, qos, retain = delivery
        conn = self.conn
        if (
            self.queue or self.holding or self.sub_ids or self.redeliver or self.gaps
            or msg.expires_at is not None or conn is None or conn.closing or conn.backed_up
            or not self.max_queued
        ):
            self.enqueue(msg, qos, retain)
            return False
        if qos:
            inflight = self.inflight
            if len(inflight) + len(self.released) >= conn.send_quota:
                self.enqueue(msg, qos, retain)
                return False
            if conn.fits(msg, qos):
                pid = self.next_packet_id()
                if inflight is EMPTY_DICT:
                    inflight = self._own_inflight()
                inflight[pid] = delivery
                conn.send_publish(msg, qos, retain, pid)
                if self.persistent:
                    self.dirty = True  # its packet id is saved: a crash re-sends it as DUP
        elif conn.fits(msg, 0):
            conn.send_publish(msg, 0, retain, 0)
        return True

    def next_packet_id(self) -> int:
        pid = self._next_pid
        reserved = self.released
        while pid in self.inflight or (reserved and pid in reserved):
            pid = pid % 65535 + 1
        self._next_pid = pid % 65535 + 1
        return pid

    def pump(self) -> None:
        """Send queued messages while the window and the socket allow."""
        conn = self.conn
        if conn is None or conn.closing:
            return
        queue = self.queue
        inflight = self.inflight
        quota = conn.send_quota
        while queue:
            if conn.backed_up:
                return
            msg, qos, retain = queue[0]
            if msg.expires_at is not None:
                left = msg.expires_at - time.time()
                if left <= 0:
                    queue.popleft()
                    self.expired += 1
                    continue
                # the receiver gets what is left of the interval (MQTT 5, 3.3.2.3.3)
                msg = msg.derived(message_expiry_interval=max(1, math.ceil(left)))
            if qos:
                if len(inflight) + len(self.released) >= quota:
                    return
                queue.popleft()
                if not conn.fits(msg, qos):
                    continue
                if self.redeliver and msg.tp is not None:
                    again = self.redeliver.pop((msg.tp[0], msg.tp[1], msg.offset), None)
                    if again is not None and again[0] not in inflight:
                        inflight = self._own_inflight()
                        inflight[again[0]] = (msg, again[1], retain)
                        conn.send_publish(msg, again[1], retain, again[0], dup=True)
                        continue
                pid = self.next_packet_id()
                if inflight is EMPTY_DICT:
                    inflight = self._own_inflight()
                inflight[pid] = (msg, qos, retain)
                conn.send_publish(msg, qos, retain, pid)
                if self.persistent:
                    self.dirty = True  # its packet id is saved: a crash re-sends it as DUP
            else:
                queue.popleft()
                if conn.fits(msg, 0):
                    conn.send_publish(msg, 0, retain, 0)
        if queue is not NO_QUEUE:
            self.queue = NO_QUEUE  # drained: the deque goes back
        if self.gaps and not self.holding and self.refill is not None:
            self.refill(self)

    def on_puback(self, pid: int) -> bool:
        """PUBACK (QoS 1) or PUBCOMP (QoS 2, after our PUBREL): the slot is free."""
        if self.released and pid in self.released:
            self.released.discard(pid)
            if self.persistent:
                self.dirty = True
            self.pump()
            return True
        delivered = self.inflight.pop(pid, None) if self.inflight else None
        if delivered is None:
            return False
        if self.persistent and delivered[0].tp is not None:
            self.dirty = True
        self.pump()
        return True

    def on_pubrec(self, pid: int) -> bool:
        """The client has our QoS 2 message: from now on only PUBREL/PUBCOMP remain."""
        delivered = self.inflight.pop(pid, None) if self.inflight else None
        if delivered is None:
            return pid in self.released
        if not self.released:
            self.released = set()
        self.released.add(pid)
        if self.persistent:
            self.dirty = True
        return True

    def in_window(self) -> int:
        return len(self.inflight) + len(self.released)

    def suspend(self) -> None:
        """The client left (persistent session): remember what must go out again as DUP.

        Messages from the log are re-read from the resume offset (which is at most
        their offset) and matched back to their packet id; locally routed ones stay
        in ``inflight`` and are re-sent directly on reconnect.
        """
        for pid, (msg, qos, _retain) in list(self.inflight.items()):
            if msg.tp is not None:
                if self.redeliver is EMPTY_DICT:
                    self.redeliver = {}
                self.redeliver[(msg.tp[0], msg.tp[1], msg.offset)] = (pid, qos)
                del self.inflight[pid]

    def resend_inflight(self) -> None:
        """On reconnect: PUBREL again for released QoS 2, DUP PUBLISH for the rest in flight."""
        conn = self.conn
        if conn is None:
            return
        for pid in self.released:
            conn.send_pubrel(pid)
        for pid, (msg, qos, retain) in list(self.inflight.items()):
            conn.send_publish(msg, qos, retain, pid, dup=True)

    # ---- what survives a restart ------------------------------------------------------
    def qos2_state(self) -> dict[int, list[Any]]:
        return {pid: [e.nonce, e.ktopic, e.starts] for pid, e in self.qos2_in.items() if e.nonce}

    def inflight_state(self) -> list[list[Any]]:
        out: list[list[Any]] = [[pid, "", -1, -1, 2, 1] for pid in self.released]
        for pid, (msg, qos, _r) in self.inflight.items():
            if msg.tp is not None:
                out.append([pid, msg.tp[0], msg.tp[1], msg.offset, qos, 0])
        for (t, p, o), (pid, qos) in self.redeliver.items():
            out.append([pid, t, p, o, qos, 0])
        return out

    def restore(self, qos2_in: dict[int, list[Any]], inflight: list[list[Any]]) -> None:
        for pid, (nonce, ktopic, starts) in qos2_in.items():
            if self.qos2_in is EMPTY_DICT:
                self.qos2_in = {}
            self.qos2_in[pid] = Qos2In(nonce, ktopic, {int(k): int(v) for k, v in starts.items()})
        for pid, t, p, o, qos, released in inflight:
            if released:
                if not self.released:
                    self.released = set()
                self.released.add(pid)
            else:
                if self.redeliver is EMPTY_DICT:
                    self.redeliver = {}
                self.redeliver[(t, p, o)] = (pid, qos)

    # ---- offsets ------------------------------------------------------------------
    def resume_offsets(self, live: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Where a reconnect must start reading each followed partition (see module doc)."""
        if self.conn is None:
            return dict(self.offsets) if self.offsets else EMPTY_DICT
        if not self.offsets:
            return EMPTY_DICT
        out: dict[TopicPartition, int] = {}
        for tp in self.offsets:
            pos = self.catchup_pos.get(tp)
            if pos is None:
                pos = live.get(tp, self.offsets[tp])
            out[tp] = pos
        for msg, _q, _r in (*self.queue, *self.held, *self.inflight.values()):
            msg_tp = msg.tp
            if msg_tp is not None and msg_tp in out and msg.offset < out[msg_tp]:
                out[msg_tp] = msg.offset
        for (t, p, o) in self.redeliver:
            if (t, p) in out and o < out[(t, p)]:
                out[(t, p)] = o
        for tp, off in self.gaps.items():
            if tp in out and off < out[tp]:
                out[tp] = off
        return out
