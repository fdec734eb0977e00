"""Sessions: CONNECT (authentication, claim, takeover, restore), disconnect, expiry.

A CONNECT is authenticated (``Access``), its client id claimed in the session store
(another bridge may hold it: the store hands it over), an existing connection of the
same client taken over, and a persistent session restored from the store. When a
connection ends, a persistent session stays (its state saved, its expiry timer set)
and a clean one ends; its shared-subscription messages go to other members. Another
bridge claiming a client id we hold takes it over (``surrender``).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol, cast

from commonlib.kafkaclient import KafkaError

from .access import Access
from .acl import Identity
from .codec import MQTT_5, Connect, Reason, SubOptions
from .config import BridgeConfig
from .connection import Connection
from .kafka_fetcher import Fetcher
from .persistence import NEVER, SessionPersistence, unpack_opts
from .retention import Retention
from .session import EMPTY_DICT, Delivery, Session
from .session_store import StoredSession, TopicSessionStore
from .shared import hand_over
from .stats import Stats
from .subscriptions import SubscriptionIndex

log = logging.getLogger(__name__)


class Wills(Protocol):
    """What sessions need of the uplink: a connection's will, now or cancelled."""

    def settle_will(self, cid: str, *, session_ends: bool) -> None: ...

    def publish_will(self, conn: Connection, session: Session | None = None) -> None: ...


class Resumption(Protocol):
    """What sessions need of the downlink: catch-up and the partitions a session follows."""

    def refill(self, session: Session) -> None: ...

    def follow(self, session: Session) -> None: ...

    def resume(self, session: Session, present: bool) -> None: ...


class SessionManager:
    """The connections and sessions of this bridge, from CONNECT to expiry."""

    def __init__(
        self, config: BridgeConfig, stats: Stats, access: Access, persistence: SessionPersistence,
        wills: Wills, downlink: Resumption, retention: Retention, index: SubscriptionIndex,
        fetcher: Fetcher, track: Callable[[asyncio.Task[Any]], None],
    ) -> None:
        self._config = config
        self._stats = stats
        self._access = access
        self._persistence = persistence
        self._wills = wills
        self._downlink = downlink
        self._retention = retention
        self._index = index
        self._fetcher = fetcher
        self._track = track
        self.sessions = persistence.sessions
        self.owners = persistence.owners
        self.connections: set[Connection] = set()
        self.stopping = False

    def stop_admitting(self) -> None:
        """The bridge is stopping: refuse new connections; ended ones leave no will."""
        self.stopping = True

    def close_all(self) -> None:
        """Tell every client the server is shutting down (not the client's failure)."""
        for conn in list(self.connections):
            conn.clean_disconnect = True
            conn.close(Reason.SERVER_SHUTTING_DOWN, "server shutting down")

    def detach_all(self) -> None:
        for conn in list(self.connections):
            self.detach(conn, abnormal=False)

    async def housekeeping(self) -> None:
        """Keep-alive (1.5x the client's interval) and CONNECT timeouts, one pass a second."""
        while True:
            await asyncio.sleep(1.0)
            now = time.monotonic()
            for conn in list(self.connections):
                if conn.closing:
                    continue
                if conn.state != "connected":
                    if now - conn.connected_at > self._config.connect_timeout_s:
                        conn.protocol_error(Reason.MAXIMUM_CONNECT_TIME, "no CONNECT in time")
                elif conn.keep_alive and now - conn.last_rx > conn.keep_alive * 1.5:
                    conn.protocol_error(Reason.KEEP_ALIVE_TIMEOUT, "keep alive timeout")

    def admit(self, conn: Connection) -> str | None:
        cfg = self._config
        if self.stopping:
            return "shutting down"
        if len(self.connections) >= cfg.max_connections:
            self._stats.refused += 1
            return f"connection limit {cfg.max_connections} reached"
        if not self._access.rate_allows(conn.peer_host):
            self._stats.refused += 1
            return f"connection rate above {cfg.max_connection_rate}/s from {conn.peer_host}"
        self.connections.add(conn)
        self._stats.connections_total += 1
        return None

    async def connect(self, conn: Connection, p: Connect) -> tuple[Reason, dict[str, Any], bool]:
        """Authenticate, pick/restore the session; returns (reason, CONNACK properties, present)."""
        cfg = self._config
        v5 = p.protocol_level == MQTT_5
        props: dict[str, Any] = {}
        if p.properties.get("authentication_method"):
            return Reason.BAD_AUTHENTICATION_METHOD, {}, False
        refused, username = await self._access.authenticate(conn, p)
        if refused is not None:
            return refused, {}, False
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
        store = self._persistence.store
        assert store is not None
        try:
            if not await store.claim(cid, clean=p.clean_start):
                return Reason.SERVER_BUSY, {"reason_string": "client id taken by another bridge"}, False
        except KafkaError as exc:
            log.error("cannot claim session %s: %s", cid, exc)
            return Reason.SERVER_UNAVAILABLE, {}, False
        if conn.closing:
            return Reason.UNSPECIFIED_ERROR, {}, False
        old = self.sessions.get(cid)
        if old is not None and old.conn is not None:
            prev = _connection(old)
            log.info("client %s taken over by %s", cid, conn.peer)
            self.detach(prev, abnormal=True)
            prev.close(Reason.SESSION_TAKEN_OVER, "session taken over")
            old = self.sessions.get(cid)
        self._wills.settle_will(cid, session_ends=p.clean_start)  # (also the one just made)
        if old is None and len(self.sessions) >= cfg.max_sessions:
            self._stats.refused_sessions += 1
            log.warning(
                "refusing %s (client %r): session limit %d reached", conn.peer, cid, cfg.max_sessions,
                extra={"event": "refused_session", "client_id": cid},
            )
            return Reason.QUOTA_EXCEEDED, {"reason_string": "session limit reached"}, False
        present = False
        if p.clean_start:
            if old is not None:
                self._discard(old)
            if store.name == "topic" or old is not None:
                await store.delete(cid)
            session = Session(cid, max_queued=cfg.max_queued)
        elif old is not None:
            session, present = old, True
        else:
            try:
                stored = await store.load(cid)
            except KafkaError as exc:
                log.error("cannot load session %s: %s", cid, exc)
                return Reason.SERVER_UNAVAILABLE, {}, False
            if stored is not None and stored.owned_by_another(username):
                self._stats.denied_connect += 1
                return Reason.NOT_AUTHORIZED, {}, False
            session = Session(cid, max_queued=cfg.max_queued)
            if stored is not None:
                present = True
                if stored.offsets:
                    session.offsets = dict(stored.offsets)
                for f, packed in stored.subscriptions.items():
                    if not self._access.may_subscribe_as(identity, f):
                        log.warning("dropping stored subscription %r of %s: not authorized now", f, cid)
                        continue
                    opts = unpack_opts(packed)
                    session.own_subs()[f] = opts
                    if packed >> 8:
                        if session.sub_ids is EMPTY_DICT:
                            session.sub_ids = {}
                        session.sub_ids[f] = packed >> 8
                    self._index.add(session, f, opts)
                session.restore(stored.qos2_in, stored.inflight)
        if conn.closing:
            return Reason.UNSPECIFIED_ERROR, {}, False
        if not store.holds(cid):  # another bridge's newer claim won while we waited
            self._discard(session)
            return Reason.SERVER_BUSY, {"reason_string": "client id taken by another bridge"}, False
        if self.owners.get(cid, username) != username:  # another identity got it meanwhile
            self._stats.denied_connect += 1
            return Reason.NOT_AUTHORIZED, {}, False
        if session.expiry_handle is not None:
            session.expiry_handle.cancel()
            session.expiry_handle = None
        session.persistent = expiry > 0
        session.expiry_interval = expiry
        session.refill = self._downlink.refill
        self.sessions[cid] = session
        self.owners[cid] = username
        session.conn = conn
        session.epoch += 1
        conn.session = session
        conn.will = p.will
        self._downlink.follow(session)
        log.info(
            "client %s connected from %s (v%d, clean=%s, present=%s)",
            cid, conn.peer, p.protocol_level, p.clean_start, present,
            extra={"event": "connect", "client_id": cid},
        )
        return Reason.SUCCESS, props, present

    def _refuse_identity(self, conn: Connection, who: Identity, p: Connect) -> Reason | None:
        """Not authorized: another identity's client id, or a will the client may not publish."""
        cid = who.client_id
        store = self._persistence.store
        stored = store.stored(cid) if store is not None else None
        if (cid in self.owners and self.owners[cid] != who.username) or (
                stored is not None and stored.owned_by_another(who.username)):
            self._stats.denied_connect += 1
            log.warning(
                "refusing %s: client id %r belongs to another identity (user %r)",
                conn.peer, cid, who.username,
                extra={"event": "denied_connect", "client_id": cid, "reason": "client id owner"},
            )
            return Reason.NOT_AUTHORIZED
        if p.will is not None and not self._access.may_publish_as(who, p.will.topic):
            self._stats.denied_connect += 1
            log.warning(
                "refusing %s (client %r): will topic %r not authorized", conn.peer, cid, p.will.topic,
                extra={"event": "denied_connect", "client_id": cid, "reason": "will topic"},
            )
            return Reason.NOT_AUTHORIZED
        return None

    def after_connack(self, conn: Connection, present: bool) -> None:
        session = conn.session
        if session is None:
            return
        self._downlink.resume(session, present)

    def set_expiry(self, session: Session, expiry: int) -> None:
        session.expiry_interval = expiry
        session.persistent = expiry > 0

    def subscribe(self, session: Session, topic_filter: str, opts: SubOptions, sub_id: int = 0) -> None:
        session.own_subs()[topic_filter] = opts
        if sub_id:
            if session.sub_ids is EMPTY_DICT:
                session.sub_ids = {}
            session.sub_ids[topic_filter] = sub_id
        elif session.sub_ids:
            session.sub_ids.pop(topic_filter, None)
        self._index.add(session, topic_filter, opts)
        self._downlink.follow(session)
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
            for msg, qos in self._retention.matching(topic_filter):
                session.enqueue(msg, min(qos, opts.qos), True, ids)
        session.pump()

    def unsubscribe(self, session: Session, topic_filter: str) -> bool:
        found = bool(session.subs) and session.subs.pop(topic_filter, None) is not None
        if session.sub_ids:
            session.sub_ids.pop(topic_filter, None)
        self._index.remove(session, topic_filter)
        self._downlink.follow(session)
        if session.persistent:
            session.dirty = True
        return found

    def detach(self, conn: Connection, *, abnormal: bool) -> None:
        self.connections.discard(conn)
        session = conn.session
        conn.session = None
        if abnormal and not self.stopping:
            self._wills.publish_will(conn, session)
        if session is None or session.conn is not conn:
            return
        live = self._fetcher.positions
        if session.persistent:
            session.offsets = session.resume_offsets(live)
            session.dirty = True
        session.conn = None
        session.epoch += 1
        moved = hand_over(self._index, session, ending=not session.persistent)
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
        elif session.inflight:
            session.inflight.clear()
        session.holding = False
        if session.catchup_pos:
            session.catchup_pos.clear()
        if session.gaps:
            session.gaps.clear()
        if session.persistent:
            self._persistence.save_soon(session)
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
        self._stats.queued_dropped += session.dropped
        session.dropped = 0
        for f in list(session.subs):
            self._index.remove(session, f)
        if session.subs:
            session.subs.clear()
        if self.sessions.get(session.client_id) is session:
            del self.sessions[session.client_id]
            self.owners.pop(session.client_id, None)

    def _expire(self, session: Session) -> None:
        if session.conn is None and self.sessions.get(session.client_id) is session:
            log.info("session %s expired", session.client_id)
            self._discard(session)
            store = self._persistence.store
            if store is not None:
                self._track(asyncio.get_running_loop().create_task(
                    store.delete(session.client_id, release=True)))

    def surrender(self, cid: str, nonce: str, claimant: str, clean: bool = False) -> None:
        """Another bridge claimed ``cid``: close our connection and hand over the final state;
        a delayed will goes now if the claim ends the session (``clean``), else never."""
        store = self._persistence.store
        assert store is not None
        session = self.sessions.get(cid)
        state: StoredSession | None = None
        if session is not None:
            if session.conn is not None:
                prev = _connection(session)
                log.info("client %s taken over by bridge %s", cid, claimant,
                         extra={"event": "session_taken_over", "client_id": cid})
                self.detach(prev, abnormal=True)
                prev.close(Reason.SESSION_TAKEN_OVER, "session taken over by another bridge")
            if session.expiry_handle is not None:
                session.expiry_handle.cancel()
                session.expiry_handle = None
            state = self._persistence.state(session) if session.persistent else None
            self._discard(session)
            self._stats.sessions_taken_over += 1
        elif isinstance(store, TopicSessionStore):
            state = store.sessions.get(cid)  # held by an earlier run of this bridge
        self._wills.settle_will(cid, session_ends=clean)
        self._track(asyncio.get_running_loop().create_task(store.release(cid, nonce, claimant, state)))

    def room_for(self, session: Session, topic_filter: str) -> bool:
        """Would the session still fit the store's size limit with this subscription?"""
        return self._persistence.room_for(session, topic_filter)

    def release_after_save(self, conn: Connection, session: Session, pid: int) -> None:
        """PUBREL ``pid`` once the session's state is saved (``SessionPersistence``)."""
        self._persistence.release_after_save(conn, session, pid)


def _connection(session: Session) -> Connection:
    """A session's connection: always a ``Connection`` here (``session`` knows it only
    as an ``Outlet``, so that it does not import the connection module)."""
    return cast(Connection, session.conn)
