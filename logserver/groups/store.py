"""Committed offsets and group metadata kept in the log itself: ``__consumer_offsets``.

Reads and writes go through the storage engine (``logserver.storage.Storage``): appends
take the normal append path, so they get the same validation, segment rolling and
durability setting as any produce: with
``log.flush.interval.messages=1`` an OffsetCommit is answered only after the fsync that
covers its record. Start-up replays the topic from its log start (last value per key
wins, a null value deletes), which restores offsets after a clean stop and after
kill -9 alike (log recovery has already cut any torn tail).

The topic is created with ``cleanup.policy=compact``, as Kafka creates it, so a log
cleaner compacts it while the server runs. On top of that it is rewritten at start-up
when most of its records are dead (superseded or deleted): right after the replay the
live state is appended as a snapshot in a new segment, fsynced, and the segments before
it are dropped, all before the coordinator serves anything. Replaying a half-done
rewrite gives the same state, because the snapshot only repeats values already live.
The topic's creation, the fsync and the drop run on the storage worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kafkaproto import ErrorCode
from kafkaproto.records import RecordTuple, build_batch
from logserver.internal_topics import (  # noqa: F401  (re-exported: tests place groups)
    INTERNAL_TOPICS,
    OFFSETS_TOPIC,
    java_string_hash,
    kafka_partition_for,
)
from logserver.storage.api import AppendResult, Storage, TopicExistsError
from logserver.storage.replay import replay_entries

log = logging.getLogger(__name__)

# Any Produce version >= 7 accepts every codec; our batches are uncompressed anyway.
_APPEND_API_VERSION = 9
# Snapshot batches stay well below the default max.message.bytes (1 MiB).
_SNAPSHOT_BATCH_BYTES = 256 * 1024
# Rewrite when at least this many records are dead and they are at least half the log
# (Kafka's log cleaner: min.cleanable.dirty.ratio 0.5).
REWRITE_MIN_DEAD_RECORDS = 10_000


@dataclass(slots=True)
class AppendOutcome:
    """An append's error (Kafka's coordinator mapping), log offset, and durability wait."""

    error: int
    base_offset: int = -1
    wait: asyncio.Future[None] | None = None


@dataclass(slots=True)
class LogEntry:
    """One record of ``__consumer_offsets`` as replayed: a TxnOffsetCommit's records
    come in a transactional batch of their producer; a transaction marker has ``marker``
    True (commit) or False (abort)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    producer_id: int = -1
    transactional: bool = False
    marker: bool | None = None


class HasStorage(Protocol):
    """What the store needs from the broker: its storage engine and settings."""

    storage: Storage
    config: Any


class OffsetsStore:
    """Appends to, replays and rewrites the internal topic."""

    def __init__(self, broker: HasStorage) -> None:
        self._storage = broker.storage
        config = broker.config
        self._configured_partitions: int = config["offsets.topic.num.partitions"]
        self._segment_bytes: int = config["offsets.topic.segment.bytes"]
        self._creating: asyncio.Task[bytes] | None = None
        # Cluster mode places groups exactly as Kafka (kafka_partition_for); a single node
        # keeps the placement its existing data directories were written with.
        self.kafka_layout = False
        self.bad_batches = 0  # unreadable batches skipped by the replay

    # -- topic ----------------------------------------------------------------------------

    @property
    def partitions(self) -> int:
        count = self._storage.partition_count(OFFSETS_TOPIC)
        return count if count is not None else self._configured_partitions

    def exists(self) -> bool:
        return self._storage.partition_count(OFFSETS_TOPIC) is not None

    async def ensure_topic(self) -> int | None:
        """Create the internal topic (as Kafka does on the first FindCoordinator).

        Concurrent callers share one creation. Returns an error code if it cannot be
        created, else None.
        """
        if self.exists():
            return None
        if self._creating is None or self._creating.done():
            configs = {"cleanup.policy": "compact", "segment.bytes": str(self._segment_bytes)}
            self._creating = asyncio.get_running_loop().create_task(
                self._storage.create_topic(OFFSETS_TOPIC, self._configured_partitions, configs))
        try:
            await asyncio.shield(self._creating)
        except TopicExistsError:
            pass  # created by someone else meanwhile (or being deleted: retried by clients)
        except Exception as exc:  # disk full, permissions: clients retry FindCoordinator
            log.error("cannot create %s: %s", OFFSETS_TOPIC, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return None if self.exists() else ErrorCode.COORDINATOR_NOT_AVAILABLE

    def partition_for(self, group_id: str) -> int:
        """The group's partition: in cluster mode Kafka's (``kafka_partition_for``); on a
        single node ``(hashCode & 0x7fffffff) % partitions``, which differs from Kafka's
        for negative hash codes but is kept, since a data directory with several
        partitions was written with it (and by default there is only one)."""
        if self.kafka_layout:
            return kafka_partition_for(group_id, self.partitions)
        return (java_string_hash(group_id) & 0x7FFFFFFF) % self.partitions

    # -- append ---------------------------------------------------------------------------

    def append(self, group_id: str, records: Sequence[tuple[bytes, bytes | None]],
               now_ms: int | None = None) -> AppendOutcome:
        """Append one batch to the group's partition; mapped like Kafka's coordinator.

        If the topic does not exist yet, it is created first (on the storage worker) and
        ``wait`` covers the creation and the append; ``base_offset`` is set by then.
        """
        timestamp = int(time.time() * 1000) if now_ms is None else now_ms
        batch: list[RecordTuple] = [(key, value, (), timestamp) for key, value in records]
        partition = self.partition_for(group_id)
        if self.exists():
            return self._append_batch(partition, batch)
        outcome = AppendOutcome(ErrorCode.NONE)
        outcome.wait = asyncio.ensure_future(self._create_then_append(outcome, partition, batch))
        return outcome

    async def _create_then_append(self, outcome: AppendOutcome, partition: int,
                                  records: list[RecordTuple]) -> None:
        error = await self.ensure_topic()
        if error is not None:
            raise OSError(f"{OFFSETS_TOPIC} cannot be created")
        appended = self._append_batch(partition, records)
        if appended.error != ErrorCode.NONE:
            raise OSError(f"append to {OFFSETS_TOPIC} failed: {ErrorCode(appended.error).name}")
        outcome.base_offset = appended.base_offset
        if appended.wait is not None:
            await appended.wait

    def append_transactional(self, group_id: str, records: Sequence[tuple[bytes, bytes]],
                             producer_id: int, producer_epoch: int) -> AppendOutcome:
        """A TxnOffsetCommit's records as one transactional batch of the producer (as
        Kafka's coordinator writes them): invisible to the group until the transaction's
        marker reaches this partition. Its sequence continues the producer's at the
        partition, so the idempotence check (which also fences an older epoch) passes."""
        if not self.exists():
            return AppendOutcome(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        timestamp = int(time.time() * 1000)
        partition = self.partition_for(group_id)
        sequence = 0
        for pid, epoch, last_seq, *_ in self._storage.active_producers(OFFSETS_TOPIC, partition) or ():
            if pid == producer_id and epoch == producer_epoch and last_seq >= 0:
                sequence = (last_seq + 1) & 0x7FFFFFFF
        return self._append_batch(partition, [(k, v, (), timestamp) for k, v in records],
                                  producer=(producer_id, producer_epoch, sequence))

    def _append_batch(self, partition: int, records: list[RecordTuple],
                      producer: tuple[int, int, int] | None = None) -> AppendOutcome:
        if producer is None:
            batch = bytearray(build_batch(records))
        else:
            batch = bytearray(build_batch(records, producer_id=producer[0],
                                          producer_epoch=producer[1], base_sequence=producer[2],
                                          is_transactional=True))
        result: AppendResult = self._storage.append(OFFSETS_TOPIC, partition, memoryview(batch),
                                                    _APPEND_API_VERSION)
        if result.error != ErrorCode.NONE:
            log.warning("append to %s-%d failed: %s", OFFSETS_TOPIC, partition,
                        result.message or ErrorCode(result.error).name)
            return AppendOutcome(_coordinator_error(result.error))
        if result.wait is None:
            return AppendOutcome(ErrorCode.NONE, result.base_offset)
        return AppendOutcome(ErrorCode.NONE, result.base_offset, asyncio.ensure_future(result.wait))

    # -- replay ---------------------------------------------------------------------------

    def iter_log(self, partition: int, *, to_log_end: bool = False) -> Iterator[LogEntry]:
        """Every record of one partition from its log start, in offset order; up to the
        high watermark, or with ``to_log_end`` the log end (a new partition leader)."""
        for entry in replay_entries(self._storage, OFFSETS_TOPIC, partition,
                                    on_bad=self._count_bad, to_log_end=to_log_end):
            record = entry.record
            yield LogEntry(record.offset, record.timestamp, record.key, record.value,
                           entry.producer_id, entry.transactional, entry.marker)

    def _count_bad(self, offset: int, error: Exception) -> None:
        self.bad_batches += 1  # counted, logged, skipped: never a crash

    # -- rewrite (compaction) -------------------------------------------------------------

    def should_rewrite(self, total_records: int, live_records: int) -> bool:
        dead = total_records - live_records
        return dead >= REWRITE_MIN_DEAD_RECORDS and dead >= live_records

    async def rewrite(self, snapshot: dict[int, list[tuple[bytes, bytes, int]]]) -> int:
        """Replace each partition's log by ``snapshot[p]`` (key, value, timestamp) records.

        The caller keeps group requests out meanwhile (the coordinator is "loading"), so
        nothing is appended between the snapshot and the drop of the old segments.
        Batches are built and the segments dropped off the event loop. Returns the
        number of records the partitions' log start offsets moved past.
        """
        storage = self._storage
        loop = asyncio.get_running_loop()
        starts: list[tuple[int, int]] = []
        for partition in range(self.partitions):
            if storage.partition_count(OFFSETS_TOPIC) is None:
                break
            start = storage.roll(OFFSETS_TOPIC, partition)
            batches = await loop.run_in_executor(None, _build_batches, snapshot.get(partition, []))
            for batch in batches:
                result = storage.append(OFFSETS_TOPIC, partition, memoryview(batch),
                                        _APPEND_API_VERSION)
                if result.error != ErrorCode.NONE:
                    log.error("%s-%d: rewrite failed (%s); keeping the old segments",
                              OFFSETS_TOPIC, partition, ErrorCode(result.error).name)
                    return 0
            starts.append((partition, start))
        dropped = 0
        for partition, _ in starts:
            await storage.flush(OFFSETS_TOPIC, partition)  # the snapshot is durable first
        for partition, start in starts:
            before = storage.log_start_offset(OFFSETS_TOPIC, partition) or 0
            after = await storage.delete_records_below(OFFSETS_TOPIC, partition, start)
            dropped += after - before
        return dropped


def _build_batches(records: list[tuple[bytes, bytes, int]]) -> list[bytearray]:
    return [bytearray(build_batch([(k, v, (), ts) for k, v, ts in chunk]))
            for chunk in _chunks(records)]


def _chunks(records: list[tuple[bytes, bytes, int]]) -> Iterator[list[tuple[bytes, bytes, int]]]:
    batch: list[tuple[bytes, bytes, int]] = []
    size = 0
    for record in records:
        batch.append(record)
        size += len(record[0]) + len(record[1]) + 16
        if size >= _SNAPSHOT_BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _coordinator_error(error: int) -> int:
    """GroupMetadataManager's mapping of append errors to what group clients understand."""
    if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                 ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
                 ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return error
