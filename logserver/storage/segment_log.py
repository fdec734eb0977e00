"""The segment-log engine: ``Storage`` over the LogManager and its partition Logs.

Topic creation, deletion and growth run on the storage worker thread (mkdir, segment and
index files, fsyncs, the topics file, rmtree); the loop publishes the result in one step
when the worker is done, so a topic is visible only once it is complete on disk. The
operation itself runs as its own task: a caller that goes away (a client disconnecting)
does not leave the LogManager and the published state disagreeing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import shutil
from collections.abc import Awaitable, Mapping
from typing import Any

from commonlib.latency import LatencyHistogram
from kafkaproto.batch import Compression, parse_header
from logserver.broker_overrides import BrokerOverrides
from logserver.cleaner_schedule import run_cleaner
from logserver.cluster_meta import load_or_create_cluster_id, read_cluster_id
from logserver.config import Config
from logserver.durability import Durability
from logserver.gc_pause import gc_paused
from logserver.log.errors import UnknownTopicOrPartitionError
from logserver.log.log import Log
from logserver.log.manager import LogManager, TopicInfo
from logserver.log.slice import SegmentSlice
from logserver.log.worker import StorageWorker
from logserver.partition import Partition
from logserver.producer_ids import ProducerIdAllocator
from logserver.retention import run_retention
from logserver.storage.api import LogDirInfo, PartitionDirInfo, Records
from logserver.storage.base import PartitionedStorage, TopicState
from logserver.topic_config import TopicConfig, ignored_overrides, kept_overrides
from logserver.validation_offload import ValidationOffload

log = logging.getLogger(__name__)

_BATCH_HEADER = 61


def _region_bytes(region: SegmentSlice) -> bytes:
    with region:
        return region.read()


class SegmentPartitionLog:
    """A partition Log as the shared Partition sees it (``logserver.partition.PartitionLog``)."""

    __slots__ = ("_log", "aborted_txns", "append", "check_producer", "last_stable_offset",
                 "max_timestamp_offset", "offset_for_timestamp", "ongoing_txns")

    def __init__(self, log_: Log) -> None:
        self._log = log_
        self.append = log_.append
        self.check_producer = log_.check_producer
        self.offset_for_timestamp = log_.offset_for_timestamp
        self.max_timestamp_offset = log_.max_timestamp_offset
        self.last_stable_offset = log_.last_stable_offset
        self.ongoing_txns = log_.ongoing_txns
        self.aborted_txns = log_.aborted_txns

    @property
    def directory_pending(self) -> bool:
        return self._log.directory_pending

    def prepare_directory(self) -> None:
        self._log.prepare_directory()

    @property
    def log_start_offset(self) -> int:
        return self._log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log.log_end_offset

    @property
    def size_bytes(self) -> int:
        return self._log.size_bytes

    def read(self, offset: int, max_bytes: int, *, min_one: bool,
             upper_bound: int | None = None) -> Records | None:
        region = self._log.read(offset, max_bytes, upper_bound, min_one=min_one)
        return region  # a pinned SegmentSlice: the network layer releases it once sent

    def active_producers(self) -> list[tuple[int, int, int, int, int]]:
        return [(pid, e.epoch, e.last_seq, e.last_timestamp, e.coordinator_epoch)
                for pid, e in self._log.producer_state.producers.items()]

    def coordinator_epoch(self, producer_id: int) -> int:
        return self._log.producer_state.coordinator_epoch(producer_id)

    def has_zstd(self, records: Records) -> bool:
        """Only old fetchers pay for this look at the batch headers."""
        if not isinstance(records, SegmentSlice):
            return False
        position, end = 0, records.length
        while position + _BATCH_HEADER <= end:
            header = parse_header(records.read(position, _BATCH_HEADER))
            if header.compression == Compression.ZSTD:
                return True
            position += header.size
        return False


class SegmentLogStorage(PartitionedStorage):
    """``Storage`` on the data directory (logserver.log)."""

    def __init__(self, config: Config) -> None:
        super().__init__()
        self._config = config
        self._worker = StorageWorker("storage")
        self._durability = Durability(config["log.flush.interval.messages"],
                                      config["log.flush.interval.ms"],
                                      on_flushed=self._on_flushed)
        self._manager: LogManager | None = None
        self._producer_ids: ProducerIdAllocator | None = None
        self._reserving: asyncio.Lock | None = None
        self._retention: asyncio.Task[None] | None = None
        self._cleaner: asyncio.Task[None] | None = None
        self._cluster_id = ""
        offload_min = config["produce.validation.thread.min.bytes"]
        # Large compressed batches validated off the event loop (logserver.validation_offload).
        self._offload = ValidationOffload(offload_min) if offload_min >= 0 else None

    # -- lifecycle ------------------------------------------------------------------------

    def open(self) -> None:
        data_dir = self._config.data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        node_id = self._config["node.id"]
        if self._config["cluster.etcd.endpoints"]:  # the id comes from etcd (cluster/identity.py)
            self._cluster_id = read_cluster_id(data_dir, node_id) or ""
        else:
            self._cluster_id = load_or_create_cluster_id(data_dir, node_id)
        self._producer_ids = ProducerIdAllocator(data_dir)
        self._manager = LogManager(data_dir, self._config)
        for info in self._manager.topics().values():
            ignored = ignored_overrides(info.configs)
            if ignored:
                log.warning("topic %s: ignoring stored configs this server does not apply: %s",
                            info.name, ", ".join(f"{k}={info.configs[k]}" for k in ignored))
            self._publish(info)
        log.info("opened %s: %d topics, %d partitions", data_dir, len(self._topics),
                 sum(len(t.partitions) for t in self._topics.values()))

    async def start(self) -> None:
        self._durability.start()
        assert self._manager is not None
        loop = asyncio.get_running_loop()
        self._retention = loop.create_task(run_retention(self._manager, self._config))
        self._cleaner = loop.create_task(run_cleaner(self._manager, self._config))

    async def close(self) -> None:
        for task in (self._retention, self._cleaner):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        for state in self._topics.values():
            for partition in state.partitions:
                partition.retire()  # appends still being validated are refused, not written
        await self._durability.close()
        for _, task in list(self._pending.values()):
            await asyncio.wait([task])
        await asyncio.get_running_loop().run_in_executor(None, self._worker.close)
        if self._offload is not None:
            self._offload.close()
        if self._manager is not None:
            self._manager.close()
            self._manager = None

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    @property
    def durability_mode(self) -> str:
        return self._durability.mode

    @property
    def manager(self) -> LogManager:
        """The LogManager (for engine-side maintenance and tests of the log layer)."""
        assert self._manager is not None, "storage is not open"
        return self._manager

    def _on_flushed(self, logs: list[Any]) -> None:
        if self._manager is not None:
            self._manager.maybe_checkpoint_recovery_points()

    def _after_append(self, state: TopicState, index: int) -> Awaitable[None] | None:
        log_: Log = state.logs[index]
        queued = log_.write_barrier()
        if queued is None:
            return self._durability.appended(log_)
        # Handed to the writer thread: acknowledge (and count for fsync) once written.
        # A task, so it runs also when nobody awaits it (acks=0).
        return asyncio.get_running_loop().create_task(
            self._after_write(queued, log_, state.partitions[index]))

    async def _after_write(self, queued: concurrent.futures.Future[None], log_: Log,
                           partition: Partition) -> None:
        try:
            await asyncio.wrap_future(queued)
        finally:
            partition.wake_waiters()  # the high watermark moved (or the write failed)
        wait = self._durability.appended(log_)
        if wait is not None:
            await wait

    # -- topics ---------------------------------------------------------------------------

    def _state(self, info: TopicInfo, previous: TopicState | None = None) -> TopicState:
        """The published form of a topic (built on the worker for a new topic: it is
        thousands of objects for a wide one, and nothing on the loop shares them yet)."""
        manager = self.manager
        config = manager.config.with_overrides(info.configs)
        overrides = kept_overrides(info.configs)
        kept = previous.partitions if previous is not None else ()
        logs = [manager.get_log(info.name, p) for p in range(info.partitions)]
        partitions = kept + tuple(Partition(info.name, p, SegmentPartitionLog(logs[p]), config,
                                            offload=self._offload)
                                  for p in range(len(kept), info.partitions))
        return TopicState(info.name, info.topic_id, config, overrides, partitions, tuple(logs))

    def _publish(self, info: TopicInfo, previous: TopicState | None = None) -> TopicState:
        state = self._state(info, previous)
        self._topics[info.name] = state
        return state

    def _create_on_worker(self, name: str, partitions: int, overrides: dict[str, str]) -> TopicState:
        with gc_paused():  # thousands of long-lived objects (logserver.gc_pause)
            return self._state(self.manager.create_topic(name, partitions, overrides))

    async def create_topic(self, name: str, partitions: int, overrides: Mapping[str, str]) -> bytes:
        canonical = await self._claim_name(name, partitions, overrides)
        task = asyncio.get_running_loop().create_task(self._create(name, partitions, canonical))
        self._track(name, "create", task)
        return await asyncio.shield(task)

    async def _create(self, name: str, partitions: int, overrides: dict[str, str]) -> bytes:
        state = await self._worker.run(self._create_on_worker, name, partitions, overrides)
        self._topics[name] = state  # the one step that makes it visible
        log.info("created topic %s with %d partitions%s", name, partitions,
                 f" and configs {overrides}" if overrides else "")
        return state.topic_id

    async def delete_topic(self, name: str) -> bytes:
        state = self._topics.get(name)
        if state is None or name in self._pending:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        self._unpublish(name)
        task = asyncio.get_running_loop().create_task(self._delete(state))
        self._track(name, "delete", task)
        return await asyncio.shield(task)

    async def _delete(self, state: TopicState) -> bytes:
        try:
            await self._worker.run(self.manager.delete_topic, state.name)
        except BaseException:
            info = self.manager.topic(state.name)
            if info is not None:  # failed before the topics file forgot it: still there
                self._publish(info)
            raise
        log.info("deleted topic %s", state.name)
        return state.topic_id

    async def add_partitions(self, name: str, total: int) -> None:
        state = self._topics.get(name)
        if state is None or name in self._pending:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        task = asyncio.get_running_loop().create_task(self._grow(name, total))
        self._track(name, "grow", task)
        await asyncio.shield(task)

    async def _grow(self, name: str, total: int) -> None:
        info = await self._worker.run(self.manager.create_partitions, name, total)
        self._publish(info, self._topics.get(name))

    async def _store_overrides(self, name: str, overrides: dict[str, str]) -> TopicConfig:
        info = await self._worker.run(self.manager.alter_topic_configs, name, overrides)
        return self.manager.config.with_overrides(info.configs)

    def broker_overrides(self) -> BrokerOverrides:
        return self.manager.broker_overrides

    async def _store_broker_overrides(self, overrides: BrokerOverrides) -> TopicConfig:
        return await self._worker.run(self.manager.set_broker_overrides, overrides)

    async def _delete_records(self, topic: str, partition: int, offset: int) -> int:
        self._log(topic, partition)
        return await self._worker.run(self.manager.delete_records, topic, partition, offset)

    def log_dirs(self) -> list[LogDirInfo]:
        data_dir = self._config.data_dir
        try:
            usage = shutil.disk_usage(data_dir)
            total, usable = usage.total, usage.free
        except OSError:
            total = usable = -1
        partitions = [PartitionDirInfo(state.name, index, log_.size_bytes, 0)
                      for state in self._topics.values() for index, log_ in enumerate(state.logs)]
        return [LogDirInfo(str(data_dir.resolve()), total, usable, partitions)]

    # -- partition maintenance --------------------------------------------------------------

    def _footprint(self, log_: Any) -> tuple[int, int]:
        segment_log: Log = log_
        return len(segment_log.segments), segment_log.size_bytes

    @property
    def fsync_latency(self) -> LatencyHistogram | None:
        return self._durability.flush_latency

    def _log(self, topic: str, partition: int) -> Log:
        state = self._topics.get(topic)
        if state is None or not 0 <= partition < len(state.logs):
            raise UnknownTopicOrPartitionError(f"unknown topic partition {topic}-{partition}")
        log_: Log = state.logs[partition]
        return log_

    def read_bytes(self, topic: str, partition: int, offset: int, max_bytes: int) -> bytes | None:
        region = self._log(topic, partition).read(offset, max_bytes)
        return None if region is None else _region_bytes(region)

    def roll(self, topic: str, partition: int) -> int:
        log_ = self._log(topic, partition)
        log_.roll()
        return log_.log_end_offset

    async def truncate_to(self, topic: str, partition: int, offset: int) -> int:
        return int(await self._worker.run(self._log(topic, partition).truncate_to, offset))

    async def restart_at(self, topic: str, partition: int, offset: int) -> int:
        log_ = self._log(topic, partition)
        leo = int(await self._worker.run(log_.truncate_fully_and_start_at, offset))
        await self._worker.run(self.manager.save_start_offsets)
        return leo

    async def flush(self, topic: str, partition: int) -> None:
        await self._worker.run(self._log(topic, partition).flush)

    async def delete_records_below(self, topic: str, partition: int, offset: int) -> int:
        log_ = self._log(topic, partition)
        await self._worker.run(log_.delete_segments_below, offset)
        return log_.log_start_offset

    # -- producer ids ---------------------------------------------------------------------

    async def allocate_producer_id(self) -> int:
        ids = self._producer_ids
        assert ids is not None, "storage is not open"
        if self._reserving is None:
            self._reserving = asyncio.Lock()
        while (producer_id := ids.take()) is None:
            async with self._reserving:
                if ids.exhausted:
                    await self._worker.run(ids.reserve_block)
        return producer_id
