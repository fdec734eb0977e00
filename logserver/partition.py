"""One partition as the broker sees it: validated appends, reads, waiters for new data.

Single node: the leader is the whole ISR, so the high watermark is the log end offset.
Leader epoch policy (kept forever): constant 0, stamped on every appended batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, FileRegion
from kafkaproto.batch import (
    BATCH_HEADER_SIZE,
    Compression,
    CorruptBatchError,
    InvalidRecordError,
    parse_header,
    set_log_append_time,
    validate_produce_records,
)
from logserver.log.errors import OffsetOutOfRangeError
from logserver.log.producer_state import Decision, Verdict

if TYPE_CHECKING:
    from logserver.log.log import Log
    from logserver.log.slice import SegmentSlice

log = logging.getLogger(__name__)

LEADER_EPOCH = 0
ZSTD_MIN_PRODUCE_VERSION = 7
ZSTD_MIN_FETCH_VERSION = 10

_VERDICT_ERRORS = {
    Verdict.OUT_OF_ORDER_SEQUENCE: ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    Verdict.INVALID_PRODUCER_EPOCH: ErrorCode.INVALID_PRODUCER_EPOCH,
}


@dataclass(slots=True)
class AppendResult:
    error: int
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    wait: Awaitable[None] | None = None  # what the acknowledgement must wait for


class Partition:
    __slots__ = ("topic", "index", "log", "_waiters", "log_append_time", "max_message_bytes")

    def __init__(self, topic: str, index: int, log_: Log, *, log_append_time: bool,
                 max_message_bytes: int) -> None:
        self.topic = topic
        self.index = index
        self.log = log_
        self._waiters: list[asyncio.Future[None]] = []
        self.log_append_time = log_append_time
        self.max_message_bytes = max_message_bytes

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index})"

    @property
    def leader_epoch(self) -> int:
        return LEADER_EPOCH

    @property
    def high_watermark(self) -> int:
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
            header = validate_produce_records(records)
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
        base_offset = self.log.append(records, header)
        self._wake_waiters()
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
              api_version: int) -> tuple[int, FileRegion | bytes]:
        """The records as a pinned SegmentSlice (the sender releases it), or b""."""
        try:
            records = self.log.read(offset, max_bytes, min_one=min_one)
        except OffsetOutOfRangeError:
            return ErrorCode.OFFSET_OUT_OF_RANGE, b""
        if records is None:
            return ErrorCode.NONE, b""
        if api_version < ZSTD_MIN_FETCH_VERSION and self._has_zstd(records):
            records.release()
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, b""
        return ErrorCode.NONE, records

    @staticmethod
    def _has_zstd(records: SegmentSlice) -> bool:
        """Only old fetchers pay for this look at the batch headers."""
        position, end = 0, records.length
        while position + BATCH_HEADER_SIZE <= end:
            header = parse_header(records.read(position, BATCH_HEADER_SIZE))
            if header.compression == Compression.ZSTD:
                return True
            position += header.size
        return False

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

    def _wake_waiters(self) -> None:
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for future in waiters:
                if not future.done():
                    future.set_result(None)

