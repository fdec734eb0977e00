"""One partition as any storage engine serves it: validated appends, reads, waiters.

The engine supplies the partition's log (``PartitionLog``: the segment log's ``Log``
behind a thin adapter, or the in-memory log); everything Kafka decides before an append
(batch validation, max.message.bytes, idempotence verdicts, LogAppendTime) happens here
once, so every engine behaves the same.

Single node: the leader is the whole ISR, so the high watermark is the log end offset.
Leader epoch policy (kept forever): constant 0, stamped on every appended batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Protocol

from kafkaproto import ErrorCode, FileRegion
from kafkaproto.batch import (
    BatchHeader,
    Compression,
    CorruptBatchError,
    InvalidRecordError,
    iter_batches,
    set_log_append_time,
)
from kafkaproto.validate import validate_batch
from logserver.log.errors import OffsetOutOfRangeError
from logserver.log.producer_state import Decision, Verdict
from logserver.storage.api import AppendResult, Records
from logserver.topic_config import TopicConfig

log = logging.getLogger(__name__)

LEADER_EPOCH = 0
ZSTD_MIN_PRODUCE_VERSION = 7
ZSTD_MIN_FETCH_VERSION = 10

_VERDICT_ERRORS = {
    Verdict.OUT_OF_ORDER_SEQUENCE: ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    Verdict.INVALID_PRODUCER_EPOCH: ErrorCode.INVALID_PRODUCER_EPOCH,
}

__all__ = ["LEADER_EPOCH", "AppendResult", "Partition", "PartitionLog"]


class PartitionLog(Protocol):
    """What a storage engine's log of one partition offers the Partition."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    def check_producer(self, header: BatchHeader) -> Decision: ...

    def append(self, batch: memoryview, header: BatchHeader, *,
               leader_epoch: int | None = LEADER_EPOCH) -> int:
        """``leader_epoch`` is stamped on the batch; None keeps the batch's own."""
        ...

    def read(self, offset: int, max_bytes: int, *, min_one: bool,
             upper_bound: int | None = None) -> Records | None:
        """Raises OffsetOutOfRangeError outside [log start, log end]; nothing at or
        after ``upper_bound`` (the replicated high watermark) when it is given."""
        ...

    def has_zstd(self, records: Records) -> bool: ...

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None: ...

    def max_timestamp_offset(self) -> tuple[int, int] | None: ...


class Partition:
    __slots__ = ("topic", "index", "log", "config", "_waiters", "log_append_time",
                 "max_message_bytes", "replicated_hw", "leader_epoch")

    def __init__(self, topic: str, index: int, log_: PartitionLog, config: TopicConfig) -> None:
        self.topic = topic
        self.index = index
        self.log = log_
        self.config = config
        self._waiters: list[asyncio.Future[None]] = []
        self.log_append_time = config.log_append_time
        self.max_message_bytes = config.max_message_bytes
        # Cluster mode: the high watermark the replicas agreed on; None on a single node,
        # where the high watermark is the log end offset.
        self.replicated_hw: int | None = None
        # Stamped on every appended batch: constant 0 on a single node, the partition's
        # leader epoch in cluster mode.
        self.leader_epoch = LEADER_EPOCH

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index})"

    @property
    def high_watermark(self) -> int:
        hw = self.replicated_hw
        return self.log.log_end_offset if hw is None else min(hw, self.log.log_end_offset)

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    # -- produce ------------------------------------------------------------------------

    def append(self, records: memoryview | None, produce_version: int) -> AppendResult:
        """Validate one produce request's batch and append it, or say why not."""
        if records is None or len(records) == 0:
            return AppendResult(ErrorCode.CORRUPT_MESSAGE, message="no record batch")
        if len(records) > self.max_message_bytes:
            return AppendResult(ErrorCode.MESSAGE_TOO_LARGE,
                                message=f"batch of {len(records)} bytes exceeds max.message.bytes "
                                        f"{self.max_message_bytes}")
        try:
            # Every record's framing, and a compressed payload inflated under a cap
            # (decompression bombs), before anything is stored.
            header = validate_batch(records, max_uncompressed_bytes=self.max_message_bytes,
                                    reject_null_keys=self.config.compact).header
        except CorruptBatchError as exc:
            return AppendResult(ErrorCode.CORRUPT_MESSAGE, message=str(exc))
        except InvalidRecordError as exc:
            return AppendResult(ErrorCode.INVALID_RECORD, message=str(exc))
        if header.is_transactional:
            return AppendResult(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                message="transactions are not supported")
        if header.compression == Compression.ZSTD and produce_version < ZSTD_MIN_PRODUCE_VERSION:
            return AppendResult(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                                message="zstd needs Produce v7 or later")
        if header.has_producer_id:
            decision = self.log.check_producer(header)
            if decision.verdict != Verdict.APPEND:
                return self._refuse(decision)
        append_time = -1
        if self.log_append_time:
            append_time = int(time.time() * 1000)
            set_log_append_time(records, 0, append_time)
        base_offset = self.log.append(records, header, leader_epoch=self.leader_epoch)
        self.wake_waiters()
        return AppendResult(ErrorCode.NONE, base_offset, append_time, self.log.log_start_offset)

    def _refuse(self, decision: Decision) -> AppendResult:
        if decision.verdict == Verdict.DUPLICATE:
            # A retry of a batch already in the log: acknowledge it where it already is.
            return AppendResult(ErrorCode.NONE, decision.base_offset,
                                decision.timestamp if self.log_append_time else -1,
                                self.log.log_start_offset)
        error = _VERDICT_ERRORS[decision.verdict]
        return AppendResult(error, message=decision.detail or error.name)

    # -- fetch --------------------------------------------------------------------------

    def fetch(self, offset: int, max_bytes: int, *, min_one: bool,
              api_version: int, replica: bool = False) -> tuple[int, Records]:
        """Consumers read below the high watermark, follower replicas (``replica``) to
        the log end."""
        upper = None if replica or self.replicated_hw is None else self.high_watermark
        try:
            records = self.log.read(offset, max_bytes, min_one=min_one, upper_bound=upper)
        except OffsetOutOfRangeError:
            return ErrorCode.OFFSET_OUT_OF_RANGE, b""
        if records is None:
            return ErrorCode.NONE, b""
        if api_version < ZSTD_MIN_FETCH_VERSION and self.log.has_zstd(records):
            if isinstance(records, FileRegion):
                records.release()  # a pinned slice that will not be sent
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, b""
        return ErrorCode.NONE, records

    # -- replication (cluster mode) --------------------------------------------------------

    def append_replica(self, records: memoryview) -> int:
        """A follower's append of batches fetched from the leader, offsets kept as the
        leader gave them; batches already held are skipped. Returns the log end offset."""
        for position, header in iter_batches(records):
            leo = self.log.log_end_offset
            if header.base_offset + header.last_offset_delta < leo:
                continue
            if header.base_offset != leo:
                raise ValueError(f"{self}: fetched batch at {header.base_offset}, log ends at {leo}")
            self.log.append(records[position:position + header.size], header, leader_epoch=None)
        self.wake_waiters()
        return self.log.log_end_offset

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        return self.log.offset_for_timestamp(timestamp)

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        return self.log.max_timestamp_offset()

    # -- waiting for data ---------------------------------------------------------------

    def add_waiter(self, future: asyncio.Future[None]) -> None:
        self._waiters.append(future)

    def remove_waiter(self, future: asyncio.Future[None]) -> None:
        with contextlib.suppress(ValueError):
            self._waiters.remove(future)

    def wake_waiters(self) -> None:
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for future in waiters:
                if not future.done():
                    future.set_result(None)

