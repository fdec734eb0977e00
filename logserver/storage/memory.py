"""An in-memory storage engine: the same ``Storage`` answers, no files.

For fast unit tests of the handlers and the group coordinator. Appends go through the
shared ``Partition`` (the same validation and idempotence checks as the segment log,
with Kafka's ProducerStateManager); batches are kept as bytes with their offsets and
timestamps; ``roll`` marks a segment boundary so ``delete_records_below`` drops whole
"segments" as the segment log does. The contract tests (tests/unit/test_storage_contract.py)
run the same assertions against both engines.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import struct
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafkaproto.batch import (
    BATCH_HEADER_SIZE,
    MAX_TIMESTAMP_OFFSET,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    Compression,
    iter_batches,
    parse_header,
    set_base_offset,
    set_partition_leader_epoch,
)
from kafkaproto.records import decode_batch
from logserver.broker_overrides import BrokerOverrides, Overlay
from logserver.log.errors import (
    InvalidTopicError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from logserver.log.producer_state import Decision, ProducerStateManager
from logserver.log.transaction_index import AbortedTxnEntry
from logserver.log.txn_index import (
    COMMIT,
    CONTROL_KEY_SIZE,
    CONTROL_RECORD_SIZE,
    PartitionTxns,
    control_coordinator_epoch,
    control_type,
)
from logserver.partition import LEADER_EPOCH, Partition
from logserver.storage.api import LogDirInfo, PartitionDirInfo, Records
from logserver.storage.base import PartitionedStorage, TopicState
from logserver.topic_config import TopicConfig

_I64 = struct.Struct(">q")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _commit_of(batch: bytes | memoryview, header: BatchHeader) -> bool | None:
    """A marker's commit (True) or abort (False); None for a data batch."""
    if not header.is_control:
        return None
    return control_type(bytes(batch[BATCH_HEADER_SIZE:BATCH_HEADER_SIZE + CONTROL_KEY_SIZE])) == COMMIT


class MemoryLog:
    """One partition's batches in memory (``logserver.partition.PartitionLog``)."""

    def __init__(self, name: str, config: TopicConfig) -> None:
        self._batches: list[bytes] = []
        self._bases: list[int] = []  # base offset of each batch
        self._max_ts: list[int] = []
        self._boundaries: list[int] = [0]  # segment base offsets (roll points)
        self._start = 0
        self._end = 0
        self._txn_cache: PartitionTxns | None = None
        self.producer_state = ProducerStateManager(Path(f"memory:{name}"),
                                                   config.producer_id_expiration_ms)

    directory_pending = False  # nothing on disk to make

    def prepare_directory(self) -> None:
        pass

    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        return self._end

    @property
    def size_bytes(self) -> int:
        return sum(len(b) for b in self._batches)

    def check_producer(self, header: BatchHeader) -> Decision:
        return self.producer_state.check(header)

    def append(self, batch: memoryview, header: BatchHeader, *,
               leader_epoch: int | None = LEADER_EPOCH, queue: bool = True) -> int:
        base = self._end
        set_base_offset(batch, 0, base)
        if leader_epoch is not None:
            set_partition_leader_epoch(batch, 0, leader_epoch)
        self._batches.append(bytes(batch))
        self._bases.append(base)
        self._max_ts.append(_I64.unpack_from(batch, MAX_TIMESTAMP_OFFSET)[0])
        self._end = base + header.last_offset_delta + 1
        if header.is_transactional and self._txn_cache is not None:
            self._txn_cache.on_batch(header, base, _commit_of(batch, header))
        if header.producer_id >= 0:
            coordinator_epoch = -1
            if header.is_control and header.is_transactional:
                coordinator_epoch = control_coordinator_epoch(
                    bytes(batch[BATCH_HEADER_SIZE:BATCH_HEADER_SIZE + CONTROL_RECORD_SIZE]))
            self.producer_state.update(header, base, _now_ms(), coordinator_epoch)
        return base

    def active_producers(self) -> list[tuple[int, int, int, int, int]]:
        return [(pid, e.epoch, e.last_seq, e.last_timestamp, e.coordinator_epoch)
                for pid, e in self.producer_state.producers.items()]

    def coordinator_epoch(self, producer_id: int) -> int:
        return self.producer_state.coordinator_epoch(producer_id)

    def _txns(self) -> PartitionTxns:
        """Open and aborted transactions, from the batches held (kept until they change)."""
        txns = self._txn_cache
        if txns is None:
            txns = PartitionTxns()
            for batch in self._batches:
                header = parse_header(batch)
                if header.is_transactional:
                    txns.on_batch(header, header.base_offset, _commit_of(batch, header))
            self._txn_cache = txns
        return txns

    def last_stable_offset(self, high_watermark: int) -> int:
        return self._txns().last_stable_offset(high_watermark)

    def ongoing_txns(self) -> Mapping[int, int]:
        return self._txns().ongoing

    def aborted_txns(self, start: int, end: int) -> list[AbortedTxnEntry]:
        return [AbortedTxnEntry(a.producer_id, a.first_offset, a.last_offset, -1)
                for a in self._txns().aborted_between(start, end)]

    def _first_batch(self, offset: int) -> int:
        return max(bisect.bisect_right(self._bases, offset) - 1, 0)

    def read(self, offset: int, max_bytes: int, *, min_one: bool = True,
             upper_bound: int | None = None) -> Records | None:
        if offset < self._start or offset > self._end:
            raise OffsetOutOfRangeError(offset, self._start, self._end)
        upper = self._end if upper_bound is None else min(upper_bound, self._end)
        if offset >= upper:
            return None
        first = self._first_batch(offset)
        # Like the segment log, a read never crosses a segment boundary.
        boundary = self._boundaries[bisect.bisect_right(self._boundaries, self._bases[first]):]
        stop = boundary[0] if boundary else None
        out: list[bytes] = []
        size = 0
        for i in range(first, len(self._batches)):
            if (stop is not None and self._bases[i] >= stop) or self._bases[i] >= upper:
                break
            batch = self._batches[i]
            if size + len(batch) > max_bytes and (out or not min_one):
                break
            out.append(batch)
            size += len(batch)
        return b"".join(out) if out else None

    def truncate_to(self, offset: int) -> int:
        """Drop the batch holding ``offset`` and every later one (batch granularity)."""
        if offset >= self._end:
            return self._end
        first = self._first_batch(offset)
        self._txn_cache = None
        del self._batches[first:], self._max_ts[first:]
        self._end = self._bases[first] if first < len(self._bases) else self._end
        del self._bases[first:]
        return self._end

    def has_zstd(self, records: Records) -> bool:
        data = records if isinstance(records, bytes) else b""
        return any(header.compression == Compression.ZSTD for _, header in iter_batches(data))

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        for i, max_ts in enumerate(self._max_ts):
            if max_ts >= timestamp:
                return self._record_at_or_after(i, timestamp)
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        if not self._max_ts or max(self._max_ts) < 0:
            return None
        best = max(self._max_ts)
        return self._record_at_or_after(self._max_ts.index(best), best)

    def _record_at_or_after(self, index: int, timestamp: int) -> tuple[int, int]:
        data = self._batches[index]
        header = parse_header(data)
        if header.attributes & TIMESTAMP_TYPE_MASK:
            return header.base_offset, header.max_timestamp
        _, records = decode_batch(data, verify_crc=False)
        for record in records:
            if record.timestamp >= timestamp:
                return record.offset, record.timestamp
        return header.base_offset, header.max_timestamp

    def restart_at(self, offset: int) -> int:
        """Empty, continuing at ``offset`` (Kafka's truncateFullyAndStartAt)."""
        self._batches, self._bases, self._max_ts = [], [], []
        self._txn_cache = None
        self._boundaries = [offset]
        self._start = self._end = offset
        self.producer_state.reset(offset)
        return self._end

    def delete_records(self, offset: int) -> int:
        """Make ``offset`` the log start offset; batches wholly below it go."""
        if offset > self._end:
            raise OffsetOutOfRangeError(offset, self._start, self._end)
        self._start = max(self._start, offset)
        keep = 0
        while keep < len(self._bases):
            following = self._bases[keep + 1] if keep + 1 < len(self._bases) else self._end
            if following > self._start:
                break
            keep += 1
        del self._batches[:keep], self._bases[:keep], self._max_ts[:keep]
        first = self._bases[0] if self._bases else self._start
        self._boundaries = [first] + [b for b in self._boundaries if b > first]
        return self._start

    def footprint(self) -> tuple[int, int]:
        """(segments, bytes held) for the admin API."""
        return len(self._boundaries), sum(map(len, self._batches))

    def roll(self) -> int:
        if self._boundaries[-1] != self._end:
            self._boundaries.append(self._end)
        return self._end

    def delete_segments_below(self, offset: int) -> int:
        """Drop whole segments (between roll points) that end at or below ``offset``."""
        keep_from = self._start
        for following in self._boundaries[1:]:
            if following <= offset:
                keep_from = following
            else:
                break
        if keep_from == self._start:
            return self._start
        cut = bisect.bisect_left(self._bases, keep_from)
        del self._batches[:cut], self._bases[:cut], self._max_ts[:cut]
        self._boundaries = [b for b in self._boundaries if b >= keep_from]
        self._start = keep_from
        return self._start


class MemoryStorage(PartitionedStorage):
    """``Storage`` in memory; topic operations complete at once (still as coroutines)."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self._settings = config
        self._broker_overrides = BrokerOverrides()
        self._defaults = TopicConfig.from_settings(config)
        self._next_producer_id = 0
        self._cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")

    def open(self) -> None:
        pass

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        for _, task in list(self._pending.values()):
            await asyncio.wait([task])

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    @property
    def durability_mode(self) -> str:
        return "in memory (nothing survives the process)"

    # -- topics ---------------------------------------------------------------------------

    async def create_topic(self, name: str, partitions: int, overrides: Mapping[str, str]) -> bytes:
        canonical = await self._claim_name(name, partitions, overrides)
        config = self._defaults.with_overrides(canonical)
        logs = tuple(MemoryLog(f"{name}-{p}", config) for p in range(partitions))
        state = TopicState(name, uuid.uuid4().bytes, config, canonical,
                           tuple(Partition(name, p, logs[p], config) for p in range(partitions)),
                           logs)
        self._topics[name] = state  # no await since the claim: the name is still free
        return state.topic_id

    async def delete_topic(self, name: str) -> bytes:
        state = self._unpublish(name)
        if state is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        return state.topic_id

    async def add_partitions(self, name: str, total: int) -> None:
        state = self._topics.get(name)
        if state is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        count = len(state.partitions)
        if total <= count:
            raise InvalidTopicError(f"topic {name!r} has {count} partitions; {total} is not more")
        logs = tuple(MemoryLog(f"{name}-{p}", state.config) for p in range(count, total))
        self._topics[name] = TopicState(
            name, state.topic_id, state.config, state.overrides,
            state.partitions + tuple(Partition(name, count + i, log_, state.config)
                                     for i, log_ in enumerate(logs)),
            state.logs + logs)

    async def _store_overrides(self, name: str, overrides: dict[str, str]) -> TopicConfig:
        return self._defaults.with_overrides(overrides)

    def broker_overrides(self) -> BrokerOverrides:
        return self._broker_overrides

    async def _store_broker_overrides(self, overrides: BrokerOverrides) -> TopicConfig:
        self._broker_overrides = overrides
        self._defaults = TopicConfig.from_settings(Overlay(self._settings, overrides.effective()))
        return self._defaults

    async def _delete_records(self, topic: str, partition: int, offset: int) -> int:
        return self._log(topic, partition).delete_records(offset)

    def log_dirs(self) -> list[LogDirInfo]:
        partitions = [PartitionDirInfo(state.name, index, log_.size_bytes, 0)
                      for state in self._topics.values() for index, log_ in enumerate(state.logs)]
        return [LogDirInfo("memory", -1, -1, partitions)]

    # -- partition maintenance --------------------------------------------------------------

    def _footprint(self, log_: Any) -> tuple[int, int]:
        memory_log: MemoryLog = log_
        return memory_log.footprint()

    def _log(self, topic: str, partition: int) -> MemoryLog:
        state = self._topics.get(topic)
        if state is None or not 0 <= partition < len(state.logs):
            raise UnknownTopicOrPartitionError(f"unknown topic partition {topic}-{partition}")
        log_: MemoryLog = state.logs[partition]
        return log_

    def read_bytes(self, topic: str, partition: int, offset: int, max_bytes: int) -> bytes | None:
        records = self._log(topic, partition).read(offset, max_bytes)
        assert records is None or isinstance(records, bytes)
        return records

    def roll(self, topic: str, partition: int) -> int:
        return self._log(topic, partition).roll()

    async def truncate_to(self, topic: str, partition: int, offset: int) -> int:
        return self._log(topic, partition).truncate_to(offset)

    async def restart_at(self, topic: str, partition: int, offset: int) -> int:
        return self._log(topic, partition).restart_at(offset)

    async def flush(self, topic: str, partition: int) -> None:
        self._log(topic, partition)

    async def delete_records_below(self, topic: str, partition: int, offset: int) -> int:
        return self._log(topic, partition).delete_segments_below(offset)

    async def allocate_producer_id(self) -> int:
        producer_id = self._next_producer_id
        self._next_producer_id += 1
        return producer_id
