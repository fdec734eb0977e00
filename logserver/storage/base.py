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

from kafkaproto import ErrorCode
from logserver.partition import Partition
from logserver.storage.api import (
    EARLIEST,
    LATEST,
    MAX_TIMESTAMP,
    AppendResult,
    InvalidTopicError,
    ListedOffset,
    ReadResult,
    TopicExistsError,
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
        for state in self._topics.values():
            if state.topic_id == topic_id:
                return state.name
        return None

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
                partition.wake_waiters()
        return state

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
               produce_version: int) -> AppendResult:
        found = self._partition(topic, partition)
        if found is None:
            return AppendResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                message=f"no partition {partition} of topic {topic!r}")
        state, part = found
        try:
            result = part.append(records, produce_version)
        except OSError as exc:  # disk full or I/O error; the segment cut the partial write off
            log.error("append to %s-%d failed: %s", topic, partition, exc)
            return AppendResult(ErrorCode.KAFKA_STORAGE_ERROR, message=f"write failed: {exc.strerror}")
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
             min_one: bool, fetch_version: int, replica: bool = False) -> ReadResult:
        found = self._partition(topic, partition)
        if found is None:
            return ReadResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, _NO_RECORDS, 0, -1, -1)
        part = found[1]
        error, records = part.fetch(offset, max_bytes, min_one=min_one, api_version=fetch_version,
                                    replica=replica)
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
