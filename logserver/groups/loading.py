"""Loading ``__consumer_offsets`` at start-up and rewriting it to its live records.

The replay reads every partition from its log start through the store's public
``iter_log``: the last value per key wins and a null value deletes, which restores the
groups after a clean stop and after kill -9 alike (log recovery has already cut any torn
tail). A restored group with members comes back Stable in its generation, as in Kafka;
its members must heartbeat again within their session timeout. A TxnOffsetCommit's
records (a transactional batch) count once their transaction's commit marker follows
them in the log, and are dropped with an abort marker; those still without a marker
come back pending (``txn_offsets.py``).

The rewrite hands the store a snapshot of the live records (``OffsetsStore.rewrite``);
replaying a half-done rewrite gives the same state, because the snapshot only repeats
values already live.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable

import logserver.groups.records as rec
from logserver.groups.consumer import records as consumer_rec
from logserver.groups.consumer.loading import ConsumerReplay
from logserver.groups.group import CommittedOffset, Group, GroupState, Member
from logserver.groups.store import OFFSETS_TOPIC, LogEntry, OffsetsStore
from logserver.groups.txn_offsets import PendingTxnOffsets

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
# Records replayed between two yields to the event loop.
REPLAY_YIELD_EVERY = 5000


class Replay:
    """The live state of ``__consumer_offsets``, built record by record."""

    def __init__(self) -> None:
        self.records = 0
        self.offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        self.group_values: dict[str, tuple[rec.GroupValue, bytes]] = {}
        self.consumer = ConsumerReplay()  # consumer-protocol groups (KIP-848)
        # TxnOffsetCommit records whose transaction's marker is not (yet) in the log
        self.txn = PendingTxnOffsets()

    def apply(self, partition: int, entry: LogEntry) -> None:
        """One record; an unreadable one is skipped with a warning."""
        self.records += 1
        if entry.marker is not None:  # a transaction ends: its offsets count, or not
            self.txn.resolve(entry.producer_id, entry.marker, self.offsets)
            return
        if entry.key is None:
            return
        try:
            key = rec.parse_key(entry.key)
            if isinstance(key, rec.OffsetKey) and entry.transactional:
                if entry.value is not None:
                    v = rec.parse_offset_value(entry.value)
                    self.txn.add(entry.producer_id, key.group, {
                        (key.topic, key.partition): CommittedOffset(
                            v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                            v.expire_timestamp, entry.offset)})
            elif isinstance(key, rec.OffsetKey):
                tp = (key.topic, key.partition)
                if entry.value is None:
                    self.offsets.get(key.group, {}).pop(tp, None)
                else:
                    v = rec.parse_offset_value(entry.value)
                    self.offsets.setdefault(key.group, {})[tp] = CommittedOffset(
                        v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                        v.expire_timestamp, entry.offset)
            elif isinstance(key, rec.GroupKey):
                if entry.value is None:
                    self.group_values.pop(key.group, None)
                else:
                    self.group_values[key.group] = (rec.parse_group_value(entry.value),
                                                    entry.value)
            elif key is None:
                self.consumer.apply(entry.key, entry.value)
        except (rec.RecordFormatError, consumer_rec.RecordFormatError) as exc:
            log.warning("%s-%d offset %d: skipping unreadable record: %s",
                        OFFSETS_TOPIC, partition, entry.offset, exc)

    def restore(self, now_ms: int,
                new_group: Callable[[str, int, GroupState], Group]) -> list[Group]:
        """The groups to serve: every group with a live GroupMetadata record or offsets."""
        group_ids = self.group_values.keys() | {
            g for g, committed in self.offsets.items() if committed}
        groups = []
        for group_id in group_ids:
            group = _restore_group(group_id, self.group_values.get(group_id), now_ms, new_group)
            group.offsets = dict(self.offsets.get(group_id, {}))
            groups.append(group)
        return groups


def _restore_group(group_id: str, loaded: tuple[rec.GroupValue, bytes] | None, now_ms: int,
                   new_group: Callable[[str, int, GroupState], Group]) -> Group:
    if loaded is None:
        return new_group(group_id, now_ms, GroupState.EMPTY)  # offsets only
    value, raw = loaded
    state = GroupState.STABLE if value.members else GroupState.EMPTY
    timestamp = value.current_state_timestamp
    group = new_group(group_id, timestamp if timestamp >= 0 else now_ms, state)
    group.generation_id = value.generation
    group.protocol_type = value.protocol_type or None
    group.protocol_name = value.protocol
    for m in value.members:
        protocols = [(value.protocol, m.subscription)] if value.protocol is not None else []
        group.add(Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                         m.rebalance_timeout, m.session_timeout, value.protocol_type,
                         protocols, assignment=m.assignment))
    group.protocol_type = value.protocol_type or None
    group.leader_id = value.leader if value.leader in group.members else (
        next(iter(group.members), None))
    group.subscribed_topics = group.compute_subscribed_topics()
    group.persisted_value = raw
    return group


async def replay(store: OffsetsStore) -> Replay:
    """Replay every partition; yields to the loop every ``REPLAY_YIELD_EVERY`` records."""
    state = Replay()
    for partition in range(store.partitions):
        for entry in store.iter_log(partition):
            state.apply(partition, entry)
            if state.records % REPLAY_YIELD_EVERY == 0:
                await asyncio.sleep(0)
    return state


def live_records(groups: Iterable[Group]) -> int:
    return sum(group.live_records() for group in groups)


def snapshot(groups: Iterable[Group], partition_for: Callable[[str], int],
             extra: Iterable[tuple[str, bytes, bytes]] = ()
             ) -> dict[int, list[tuple[bytes, bytes, int]]]:
    """(key, value, timestamp) of every live record, by ``__consumer_offsets`` partition;
    ``extra``: (group id, key, value) records of other kinds (consumer-protocol groups)."""
    out: dict[int, list[tuple[bytes, bytes, int]]] = {}
    now = int(time.time() * 1000)
    for group_id, key, value in extra:
        out.setdefault(partition_for(group_id), []).append((key, value, now))
    for group in groups:
        entries = out.setdefault(partition_for(group.group_id), [])
        if group.persisted_value is not None:
            entries.append((rec.group_key(group.group_id), group.persisted_value,
                            group.state_timestamp))
        for (topic, partition), c in group.offsets.items():
            entries.append((rec.offset_key(group.group_id, topic, partition),
                            rec.offset_value(rec.OffsetValue(
                                c.offset, c.leader_epoch, c.metadata, c.commit_timestamp,
                                c.expire_timestamp)), c.commit_timestamp))
    return out


async def rewrite(store: OffsetsStore, groups: Iterable[Group],
                  extra: Iterable[tuple[str, bytes, bytes]] = ()) -> int:
    """Compact ``__consumer_offsets`` to the live records of ``groups`` and ``extra``;
    records dropped."""
    live = snapshot(groups, store.partition_for, extra)
    count = sum(len(entries) for entries in live.values())
    started = time.monotonic()
    dropped = await store.rewrite(live)
    log.info("rewrote %s to its %d live records: %d records dropped in %.3f s",
             OFFSETS_TOPIC, count, dropped, time.monotonic() - started)
    return dropped
