"""Persistent sessions' state in the log: the session table, saves, the commit loop.

The table (client id -> session, client id -> identity holding it) is what the
session component changes; this one writes a session's state (subscriptions, resume
offsets, QoS 2 and in-flight packet ids, owner) to the session store: when it changed
(every ``--session-commit-interval-s``), when a connection ends, at shutdown, before an
outbound PUBREL and before an inbound QoS 2 record is written (uplink).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from commonlib.kafkaclient import Backoff, KafkaError

from .codec import SubOptions
from .config import BridgeConfig
from .connection import Connection
from .kafka_fetcher import Fetcher
from .session import Session
from .session_store import PERMANENT_ERRORS, SessionStore, StoredSession
from .stats import Stats

log = logging.getLogger(__name__)

NEVER = 0xFFFFFFFF
#: A failed session save is tried again after 2 s, 4 s, ... up to a minute.
SAVE_BACKOFF = Backoff(2000, 60000)


def pack_opts(o: SubOptions) -> int:
    return o.qos | (4 if o.no_local else 0) | (8 if o.retain_as_published else 0) | (o.retain_handling << 4)


def unpack_opts(v: int) -> SubOptions:
    return SubOptions(v & 3, bool(v & 4), bool(v & 8), (v >> 4) & 3)


class SessionPersistence:
    """The session table and its writes to the session store (``store``, set at start)."""

    def __init__(self, config: BridgeConfig, stats: Stats, fetcher: Fetcher,
                 track: Callable[[asyncio.Task[Any]], None]) -> None:
        self._config = config
        self._stats = stats
        #: its live positions are where a session's resume offsets default to
        self._fetcher = fetcher
        self._track = track
        self.store: SessionStore | None = None
        self.sessions: dict[str, Session] = {}
        #: client id -> the identity (username or certificate CN; None = anonymous) holding it
        self.owners: dict[str, str | None] = {}
        #: persistent sessions -> outbound QoS 2 packet ids whose PUBREL waits for a save
        self._pubrel_wait: dict[Session, list[int]] = {}

    @property
    def stored(self) -> bool:
        """Is there a session store yet (it is chosen once the log answers)?"""
        return self.store is not None

    def state(self, session: Session) -> StoredSession:
        expires = None
        if session.conn is None and session.expiry_interval != NEVER:
            expires = time.time() + session.expiry_interval
        return StoredSession(
            {f: pack_opts(o) | (session.sub_ids.get(f, 0) << 8) for f, o in session.subs.items()},
            session.resume_offsets(self._fetcher.positions),
            expires,
            session.expiry_interval,
            session.qos2_state(),
            session.inflight_state(),
            self.owners.get(session.client_id),
            session.client_id in self.owners,
        )

    async def write_state(self, session: Session) -> None:
        """Save ``session`` now (a failure raises): the uplink's QoS 2 bookkeeping."""
        assert self.store is not None
        await self.store.save(session.client_id, self.state(session))

    def room_for(self, session: Session, topic_filter: str) -> bool:
        """Would the session still fit the store's size limit with this subscription?"""
        if topic_filter in session.subs:
            return True
        size = len(self.state(session).to_json()) + len(topic_filter.encode()) * 2 + 16
        return size <= self._config.max_session_bytes

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
        self._track(asyncio.get_running_loop().create_task(self._save_then_release(conn, session)))

    async def _save_then_release(self, conn: Connection, session: Session) -> None:
        try:
            while True:
                pids = self._pubrel_wait.get(session)
                if not pids:
                    return
                self._pubrel_wait[session] = []
                try:
                    if self.store is not None:
                        await self.store.save(session.client_id, self.state(session))
                except KafkaError as exc:
                    self._stats.session_save_failures += 1
                    log.error("cannot save session %s before PUBREL (%s): after a crash these QoS 2 "
                              "messages may come again", session.client_id, exc,
                              extra={"event": "session_save_failed", "client_id": session.client_id})
                for pid in pids:
                    if pid in session.released and session.conn is conn:
                        conn.send_pubrel(pid)
        finally:
            self._pubrel_wait.pop(session, None)

    def save_soon(self, session: Session) -> None:
        self._track(asyncio.get_running_loop().create_task(self.save(session)))

    async def save(self, session: Session, *, release: bool = False) -> None:
        """Save one session; a failure is an error in the log and in ``session_save_failures``.

        A failure no retry can fix (too large for the store) is not retried until the
        session changes again; others are retried with a growing pause (up to a minute).
        """
        if self.store is None or self.sessions.get(session.client_id) is not session:
            return  # ended, or handed to another bridge
        session.dirty = False
        try:
            await self.store.save(session.client_id, self.state(session), release=release)
            session.save_failures = 0
        except KafkaError as exc:
            self._stats.session_save_failures += 1
            session.save_failures += 1
            permanent = exc.code in PERMANENT_ERRORS
            if not permanent:
                session.dirty = True
                session.retry_at = time.monotonic() + SAVE_BACKOFF.delay_s(session.save_failures)
            log.error(
                "cannot save session %s (%s): %s", session.client_id,
                "not retried until it changes" if permanent else f"attempt {session.save_failures}",
                exc, extra={"event": "session_save_failed", "client_id": session.client_id},
            )

    async def save_sessions(self, *, all_persistent: bool = False) -> None:
        now = time.monotonic()
        todo = [s for s in self.sessions.values() if s.persistent and (
            all_persistent or (s.dirty and s.retry_at <= now))]
        if todo:
            await asyncio.gather(*(self.save(s, release=all_persistent) for s in todo),
                                 return_exceptions=True)

    async def commit_loop(self) -> None:
        while True:
            await asyncio.sleep(self._config.session_commit_interval_s)
            await self.save_sessions()
