"""What every storage engine shares: published topic state and the per-partition calls.

An engine keeps its topics in ``self._topics`` (name -> ``TopicState``), replaced entry by
entry on the event-loop thread only once a topic exists completely, so a reader on the
loop sees a topic either whole or not at all. Appends, reads and offset look-ups go to
the shared ``Partition`` (logserver.partition), which makes every engine validate and
answer the same way; an engine adds what the acknowledgement waits for and the
topic-level operations.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from commonlib.latency import LatencyHistogram
from kafkaproto import ErrorCode
from logserver.broker_overrides import BrokerOverrides
from logserver.partition import Partition
from logserver.storage.api import (
    EARLIEST,
    LATEST,
    MAX_TIMESTAMP,
    AppendResult,
    DeletedRecords,
    InvalidTopicError,
    ListedOffset,
    PartitionStats,
    ReadResult,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from logserver.topic_config import TopicConfig, validate_overrides
from logserver.topic_names import topic_name_error

log = logging.getLogger(__name__)

_NO_RECORDS = b""


@dataclass(frozen=True, slots=True)
class TopicState:
    """One topic as published to the loop: replaced whole, never changed in place."""

    name: str
    topic_id: bytes
    config: TopicConfig
    overrides: Mapping[str, str]
    partitions: tuple[Partition, ...]
    logs: tuple[Any, ...]  # the engine's log object behind each partition


class PartitionedStorage:
    """The engine-independent half of ``Storage``."""

    def __init__(self) -> None:
        self._topics: dict[str, TopicState] = {}
        self._ids: dict[bytes, str] = {}  # topic id -> name (see topic_for_id)
        # name -> the creation or deletion of that name still running
        self._pending: dict[str, tuple[str, asyncio.Task[Any]]] = {}
        # Cluster mode: what an append must also wait for to be replicated (None: nothing)
        self.replication_hook: Callable[[str, int], Awaitable[None] | None] | None = None

    # -- topics ---------------------------------------------------------------------------

    def topic_names(self) -> list[str]:
        return sorted(self._topics)

    def partition_count(self, topic: str) -> int | None:
        state = self._topics.get(topic)
        return None if state is None else len(state.partitions)

    def topic_id(self, topic: str) -> bytes | None:
        state = self._topics.get(topic)
        return None if state is None else state.topic_id

    def topic_for_id(self, topic_id: bytes) -> str | None:
        # Fetch v13+ asks this per topic per request: a cache, checked against the
        # published state and rebuilt on a miss (topics come and go rarely).
        name = self._ids.get(topic_id)
        state = None if name is None else self._topics.get(name)
        if state is not None and state.topic_id == topic_id:
            return state.name
        self._ids = {state.topic_id: state.name for state in self._topics.values()}
        return self._ids.get(topic_id)

    def topic_config(self, topic: str) -> TopicConfig | None:
        state = self._topics.get(topic)
        return None if state is None else state.config

    def topic_overrides(self, topic: str) -> Mapping[str, str] | None:
        state = self._topics.get(topic)
        return None if state is None else dict(state.overrides)

    async def _claim_name(self, name: str, partitions: int,
                          overrides: Mapping[str, str]) -> dict[str, str]:
        """Validate a creation and wait out a deletion of the same name still running;
        raises TopicExistsError when the name is taken or being created."""
        problem = topic_name_error(name)
        if problem is not None:
            raise InvalidTopicError(problem)
        if partitions < 1:
            raise InvalidTopicError(f"partition count must be >= 1, got {partitions}")
        canonical = validate_overrides(overrides)
        while True:
            pending = self._pending.get(name)
            if pending is None or pending[0] != "delete":
                break
            await asyncio.wait([pending[1]])  # its outcome is its own caller's business
        if name in self._topics or name in self._pending:
            raise TopicExistsError(f"topic {name!r} already exists")
        return canonical

    def _track(self, name: str, kind: str, task: asyncio.Task[Any]) -> None:
        entry = (kind, task)
        self._pending[name] = entry

        def done(_: asyncio.Task[Any]) -> None:
            if self._pending.get(name) is entry:
                del self._pending[name]

        task.add_done_callback(done)

    def _unpublish(self, name: str) -> TopicState | None:
        """Make a topic invisible at once; long polls on it wake and see it gone."""
        state = self._topics.pop(name, None)
        if state is not None:
            for partition in state.partitions:
                partition.retire()  # wakes long polls; fails appends still being validated
        return state

    async def alter_topic_config(self, name: str, overrides: Mapping[str, str]) -> None:
        canonical = validate_overrides(overrides)
        if name not in self._topics or name in self._pending:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        config = await self._store_overrides(name, canonical)
        state = self._topics.get(name)
        if state is None:  # deleted meanwhile
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        for partition in state.partitions:
            partition.reconfigure(config)
        self._topics[name] = TopicState(state.name, state.topic_id, config, canonical,
                                        state.partitions, state.logs)
        log.info("topic %s: configs now %s", name, canonical)

    async def _store_overrides(self, name: str, overrides: dict[str, str]) -> TopicConfig:
        """Persist a topic's new overrides (engine); returns the resolved config."""
        raise NotImplementedError

    def broker_overrides(self) -> BrokerOverrides:
        raise NotImplementedError

    async def alter_broker_overrides(self, overrides: BrokerOverrides) -> None:
        defaults = await self._store_broker_overrides(overrides)
        for name, state in list(self._topics.items()):
            config = defaults.with_overrides(state.overrides)
            for partition in state.partitions:
                partition.reconfigure(config)
            self._topics[name] = TopicState(state.name, state.topic_id, config, state.overrides,
                                            state.partitions, state.logs)

    async def _store_broker_overrides(self, overrides: BrokerOverrides) -> TopicConfig:
        """Persist the dynamic broker configs (engine); returns the new topic defaults."""
        raise NotImplementedError

    async def delete_records(self, topic: str, partition: int, offset: int) -> DeletedRecords:
        found = self._partition(topic, partition)
        if found is None:
            return DeletedRecords(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)
        part = found[1]
        high_watermark = part.high_watermark
        target = high_watermark if offset == -1 else offset
        if target < 0 or target > high_watermark:
            return DeletedRecords(ErrorCode.OFFSET_OUT_OF_RANGE, -1)
        if target <= part.log_start_offset:
            return DeletedRecords(ErrorCode.NONE, part.log_start_offset)
        try:
            start = await self._delete_records(topic, partition, target)
        except UnknownTopicOrPartitionError:
            return DeletedRecords(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)
        except OSError as exc:
            log.error("deleting records of %s-%d failed: %s", topic, partition, exc)
            return DeletedRecords(ErrorCode.KAFKA_STORAGE_ERROR, -1)
        log.info("%s-%d: records below %d deleted", topic, partition, start)
        return DeletedRecords(ErrorCode.NONE, start)

    async def _delete_records(self, topic: str, partition: int, offset: int) -> int:
        """Move one partition's log start offset (engine); returns the new one."""
        raise NotImplementedError

    # -- partitions -----------------------------------------------------------------------

    def _partition(self, topic: str, index: int) -> tuple[TopicState, Partition] | None:
        state = self._topics.get(topic)
        if state is None or not 0 <= index < len(state.partitions):
            return None
        return state, state.partitions[index]

    def _after_append(self, state: TopicState, index: int) -> Awaitable[None] | None:
        """What an acknowledgement must wait for (the engine's durability)."""
        return None

    def append(self, topic: str, partition: int, records: memoryview | None,
               produce_version: int, *, defer_io: bool = False) -> AppendResult:
        found = self._partition(topic, partition)
        if found is None:
            return AppendResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                message=f"no partition {partition} of topic {topic!r}")
        state, part = found
        try:
            result = part.append(records, produce_version, defer_io=defer_io)
        except OSError as exc:  # disk full or I/O error; the segment cut the partial write off
            log.error("append to %s-%d failed: %s", topic, partition, exc)
            return AppendResult(ErrorCode.KAFKA_STORAGE_ERROR, message=f"write failed: {exc.strerror}")
        if result.deferred is not None:
            # A task: the append completes also when nobody awaits it (acks=0).
            result.deferred = asyncio.get_running_loop().create_task(
                self._finish_append(result.deferred, state, topic, partition))
            return result
        return self._appended(result, state, topic, partition)

    async def _finish_append(self, deferred: Awaitable[AppendResult], state: TopicState,
                             topic: str, partition: int) -> AppendResult:
        try:
            result = await deferred
        except OSError as exc:
            log.error("append to %s-%d failed: %s", topic, partition, exc)
            return AppendResult(ErrorCode.KAFKA_STORAGE_ERROR, message=f"write failed: {exc.strerror}")
        return self._appended(result, state, topic, partition)

    def _appended(self, result: AppendResult, state: TopicState, topic: str,
                  partition: int) -> AppendResult:
        if result.error == ErrorCode.NONE:
            result.wait = self._after_append(state, partition)
            if self.replication_hook is not None:
                replicated = self.replication_hook(topic, partition)
                if replicated is not None:
                    result.wait = replicated if result.wait is None else _both(result.wait, replicated)
        else:
            log.debug("produce to %s-%d refused: %s", topic, partition, result.message)
        return result

    def read(self, topic: str, partition: int, offset: int, max_bytes: int, *,
             min_one: bool, fetch_version: int, upper_bound: int | None = None,
             replica: bool = False) -> ReadResult:
        found = self._partition(topic, partition)
        if found is None:
            return ReadResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, _NO_RECORDS, 0, -1, -1)
        part = found[1]
        error, records = part.fetch(offset, max_bytes, min_one=min_one, api_version=fetch_version,
                                    upper_bound=upper_bound, replica=replica)
        size = len(records) if isinstance(records, (bytes, bytearray, memoryview)) else records.length
        return ReadResult(error, records, size, part.high_watermark, part.log_start_offset)

    def list_offset(self, topic: str, partition: int, timestamp: int) -> ListedOffset:
        found = self._partition(topic, partition)
        if found is None:
            return ListedOffset(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)
        part = found[1]
        if timestamp == LATEST:
            return ListedOffset(ErrorCode.NONE, part.high_watermark, -1)
        if timestamp == EARLIEST:
            return ListedOffset(ErrorCode.NONE, part.log_start_offset, -1)
        if timestamp == MAX_TIMESTAMP:
            hit = part.max_timestamp_offset()
        elif timestamp < 0:
            return ListedOffset(ErrorCode.INVALID_REQUEST, -1, -1)
        else:
            hit = part.offset_for_timestamp(timestamp)
        if hit is None:
            return ListedOffset(ErrorCode.NONE, -1, -1)
        return ListedOffset(ErrorCode.NONE, hit[0], hit[1])

    def last_stable_offset(self, topic: str, partition: int, *,
                           fetch_offset: int | None = None) -> int | None:
        found = self._partition(topic, partition)
        if found is None:
            return None
        if fetch_offset is None:
            return found[1].last_stable_offset
        return found[1].stable_offset_for_fetch(fetch_offset)

    def aborted_transactions(self, topic: str, partition: int, start: int,
                             end: int) -> list[tuple[int, int]]:
        found = self._partition(topic, partition)
        if found is None:
            return []
        return [(a.producer_id, a.first_offset) for a in found[1].aborted_txns(start, end)]

    def active_producers(self, topic: str, partition: int) -> list[tuple[int, int, int, int, int, int]] | None:
        found = self._partition(topic, partition)
        return None if found is None else found[1].active_producers()

    def write_txn_marker(self, topic: str, partition: int, producer_id: int,
                         producer_epoch: int, *, commit: bool,
                         coordinator_epoch: int) -> AppendResult:
        found = self._partition(topic, partition)
        if found is None:
            return AppendResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                message=f"no partition {partition} of topic {topic!r}")
        state, part = found
        try:
            result = part.append_marker(producer_id, producer_epoch, commit=commit,
                                        coordinator_epoch=coordinator_epoch)
        except OSError as exc:
            log.error("marker append to %s-%d failed: %s", topic, partition, exc)
            return AppendResult(ErrorCode.KAFKA_STORAGE_ERROR, message=f"write failed: {exc.strerror}")
        result.wait = self._after_append(state, partition)
        return result
    def partition_stats(self, topic: str) -> list[PartitionStats] | None:
        state = self._topics.get(topic)
        if state is None:
            return None
        stats = []
        for partition, log_ in zip(state.partitions, state.logs, strict=True):
            segments, size = self._footprint(log_)
            stats.append(PartitionStats(
                partition.index, partition.log_start_offset, partition.log.log_end_offset,
                partition.high_watermark, segments, size, partition.bytes_in,
                partition.messages_in, partition.bytes_out, partition.waiting_fetches))
        return stats

    def _footprint(self, log_: Any) -> tuple[int, int]:
        """(segments, bytes) of the engine's log of one partition."""
        return 0, 0

    @property
    def fsync_latency(self) -> LatencyHistogram | None:
        return None

    def high_watermark(self, topic: str, partition: int) -> int | None:
        found = self._partition(topic, partition)
        return None if found is None else found[1].high_watermark

    def log_start_offset(self, topic: str, partition: int) -> int | None:
        found = self._partition(topic, partition)
        return None if found is None else found[1].log_start_offset

    # -- replication (cluster mode) --------------------------------------------------------

    def log_end_offset(self, topic: str, partition: int) -> int | None:
        found = self._partition(topic, partition)
        return None if found is None else found[1].log_end_offset

    def set_high_watermark(self, topic: str, partition: int, offset: int | None) -> None:
        found = self._partition(topic, partition)
        if found is not None:
            part = found[1]
            if part.replicated_hw != offset:
                part.replicated_hw = offset
                part.wake_waiters()  # consumers long-polling for what is now committed

    def set_leader_epoch(self, topic: str, partition: int, epoch: int) -> None:
        found = self._partition(topic, partition)
        if found is not None:
            found[1].leader_epoch = epoch

    def append_replica(self, topic: str, partition: int, records: memoryview) -> int:
        found = self._partition(topic, partition)
        if found is None:
            raise KeyError(f"no partition {partition} of topic {topic!r}")
        return found[1].append_replica(records)

    async def wait_for_append(self, partitions: Iterable[tuple[str, int]], timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()
        watched = [found[1] for topic, index in partitions
                   if (found := self._partition(topic, index)) is not None]
        for part in watched:
            part.add_waiter(woken)
        timer = loop.call_later(max(0.0, timeout_s), _wake, woken)
        try:
            await woken
        finally:
            timer.cancel()
            for part in watched:
                part.remove_waiter(woken)


async def _both(first: Awaitable[None], second: Awaitable[None]) -> None:
    await first
    await second


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
