"""Downlink: records of the log to the sessions subscribed to them, live and caught up.

The fetcher hands each partition's new records to ``on_records``; each record becomes
one ``OutMessage`` shared by every matching online session. A persistent session that
was away re-reads what it missed from its resume offsets (``catch_up``) while its live
delivery is held, so the log's order holds and nothing comes twice. ``follow`` keeps a
session's resume offsets to exactly the partitions its filters can receive.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from commonlib.kafkaclient import KafkaError, TopicPartition
from kafkaproto.records import Record

from .codec import topic_matches
from .codec.topics import filters_overlap
from .kafka_fetcher import Fetcher
from .mapping import Mapping
from .record_headers import record_properties
from .retention import Retention
from .session import EMPTY_DICT, Delivery, OutMessage, Session
from .stats import Stats
from .subscriptions import SubscriptionIndex

log = logging.getLogger(__name__)


class Downlink:
    """Delivers the downlink topics' records to sessions; catch-up after a reconnect."""

    def __init__(self, mapping: Mapping, stats: Stats, fetcher: Fetcher, retention: Retention,
                 index: SubscriptionIndex, track: Callable[[asyncio.Task[Any]], None]) -> None:
        self._mapping = mapping
        self._stats = stats
        self._fetcher = fetcher
        self._retention = retention
        self._index = index
        self._track = track
        self.refill = self._refill  # one bound method shared by every session

    def resume(self, session: Session, present: bool) -> None:
        """After CONNACK: in-flight messages again, then what the session missed, then live."""
        start = {tp: off for tp, off in session.offsets.items()
                 if off < self._fetcher.positions.get(tp, off)}
        if present:
            session.resend_inflight()
        if present and start:
            self._begin_catch_up(session, start)
        session.pump()

    def follow(self, session: Session) -> None:
        """Follow exactly the downlink partitions the session's filters can receive."""
        filters = [f for f in session.subs if not f.startswith("$share/")]
        wanted: set[TopicPartition] = set()
        for rule in self._mapping.downlink:
            if any(filters_overlap(f, rule.mqtt_filter) for f in filters):
                wanted.update(self._fetcher.partitions_of(rule.kafka_topic))
        for tp in list(session.offsets):
            if tp not in wanted:
                del session.offsets[tp]
        for tp in wanted:
            if tp not in session.offsets:
                session.own_offsets()[tp] = self._fetcher.positions.get(tp, 0)

    def on_records(self, tp: TopicPartition, records: list[Record]) -> None:
        """New records of a downlink topic's partition (the fetcher's callback)."""
        rule = self._mapping.by_kafka_topic.get(tp[0])
        if rule is None:
            return
        self._stats.downlink_records += len(records)
        touched: set[Session] = set()
        match = self._index.match_copies
        for r in records:
            topic = rule.topic_for(r.key)
            if topic is None:
                self._stats.downlink_unroutable += 1
                continue
            msg = OutMessage(topic, r.value or b"", _user_props(r), tp, r.offset)
            if rule.retain:
                if r.value:
                    self._retention.keep(topic, msg, rule.qos)
                else:
                    self._retention.clear(topic)
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
        start = {tp: off for tp, off in gaps.items() if off < self._fetcher.positions.get(tp, off)}
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
        end = {tp: self._fetcher.positions.get(tp, off) for tp, off in start.items()}
        loop = asyncio.get_running_loop()
        self._track(loop.create_task(self._catch_up(session, start, end, session.epoch)))

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
                rule = self._mapping.by_kafka_topic.get(tp[0])
                if rule is None:
                    continue
                async for nxt, records in self._fetcher.fetch_range(tp, off, end[tp]):
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


def _user_props(r: Record) -> dict[str, Any] | None:
    """v5 properties of a downlink record (request/response headers, user properties)."""
    return record_properties(r)
