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
from collections.abc import Mapping, Sequence
from typing import Protocol

from kafkaproto import ErrorCode, FileRegion
from kafkaproto.batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    BatchHeader,
    Compression,
    CorruptBatchError,
    InvalidRecordError,
    RecordErrorsError,
    iter_batches,
    parse_header,
    set_log_append_time,
)
from kafkaproto.control import build_marker
from kafkaproto.validate import validate_batch
from logserver.log.errors import OffsetOutOfRangeError
from logserver.log.producer_state import Decision, Verdict
from logserver.log.transaction_index import AbortedTxnEntry
from logserver.recompress import Recompression
from logserver.storage.api import AppendResult, Records
from logserver.topic_config import TopicConfig
from logserver.validation_offload import ValidationOffload

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

    @property
    def size_bytes(self) -> int: ...

    @property
    def directory_pending(self) -> bool:
        """True until the first append has made the partition's files (made lazily)."""
        ...

    def prepare_directory(self) -> None:
        """Make them now (blocking disk work: called on a thread)."""
        ...

    def check_producer(self, header: BatchHeader) -> Decision: ...

    def append(self, batch: memoryview, header: BatchHeader, *,
               leader_epoch: int | None = LEADER_EPOCH, queue: bool = True) -> int:
        """``leader_epoch`` is stamped on the batch; None keeps the batch's own.
        ``queue=False``: written before returning unless writes are already queued."""
        ...

    def read(self, offset: int, max_bytes: int, *, min_one: bool,
             upper_bound: int | None = None) -> Records | None:
        """Raises OffsetOutOfRangeError outside [log start, log end]; nothing at or
        after ``upper_bound`` (the replicated high watermark) when it is given."""
        ...

    def has_zstd(self, records: Records) -> bool: ...

    def last_stable_offset(self, high_watermark: int) -> int:
        """The first offset of the oldest open transaction, or ``high_watermark``."""
        ...

    def ongoing_txns(self) -> Mapping[int, int]:
        """Producer id -> first offset of its open transaction."""
        ...

    def aborted_txns(self, start: int, end: int) -> Sequence[AbortedTxnEntry]:
        """Aborted transactions overlapping [start, end) (the ``.txnindex`` files)."""
        ...

    def active_producers(self) -> list[tuple[int, int, int, int, int]]:
        """(producer id, epoch, last sequence, last timestamp, coordinator epoch of its
        last marker) of the producers it tracks."""
        ...

    def coordinator_epoch(self, producer_id: int) -> int:
        """The coordinator epoch of the producer's last marker, -1 if none."""
        ...

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None: ...

    def max_timestamp_offset(self) -> tuple[int, int] | None: ...


class Partition:
    __slots__ = ("topic", "index", "log", "config", "_waiters", "log_append_time",
                 "max_message_bytes", "_before_max_ms", "_after_max_ms", "_offload", "_tail",
                 "_recompression",
                 "_retired", "bytes_in", "messages_in", "bytes_out",
                 "replicated_hw", "leader_epoch")

    def __init__(self, topic: str, index: int, log_: PartitionLog, config: TopicConfig,
                 *, offload: ValidationOffload | None = None) -> None:
        """``offload`` validates large compressed batches on its threads (see
        logserver.validation_offload); without it every batch is validated inline."""
        self.topic = topic
        self.index = index
        self.log = log_
        self.config = config
        self._waiters: list[asyncio.Future[None]] = []
        self.log_append_time = config.log_append_time
        self.max_message_bytes = config.max_message_bytes
        self._before_max_ms = config.message_timestamp_before_max_ms
        self._after_max_ms = config.message_timestamp_after_max_ms
        # compression.type: batches in another codec are rewritten, on a thread.
        self._recompression = Recompression(config)
        self._offload = offload
        # The last append still waiting for its validation; later ones queue behind it.
        self._tail: asyncio.Task[AppendResult] | None = None
        self._retired = False
        # Kafka's BrokerTopicMetrics, counted per batch (admin /metrics sums them per topic):
        # bytes of appended batches, records in them, and record bytes handed to fetchers.
        self.bytes_in = 0
        self.messages_in = 0
        self.bytes_out = 0
        # Cluster mode: the high watermark the replicas agreed on; None on a single node,
        # where the high watermark is the log end offset.
        self.replicated_hw: int | None = None
        # Stamped on every appended batch: constant 0 on a single node, the partition's
        # leader epoch in cluster mode.
        self.leader_epoch = LEADER_EPOCH

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index})"

    def reconfigure(self, config: TopicConfig) -> None:
        """A changed topic config (AlterConfigs): applies from the next append on."""
        self.config = config
        self.log_append_time = config.log_append_time
        self.max_message_bytes = config.max_message_bytes
        self._before_max_ms = config.message_timestamp_before_max_ms
        self._after_max_ms = config.message_timestamp_after_max_ms
        self._recompression = Recompression(config)

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

    def append(self, records: memoryview | None, produce_version: int, *,
               defer_io: bool = False) -> AppendResult:
        """Validate one produce request's batch and append it, or say why not.

        A batch the offload takes (zstd, at least its ``min_bytes``), a batch the topic's
        ``compression.type`` has recompressed, with ``defer_io`` the first batch of a
        partition never written (its directory and files are made on a thread: fsyncs of
        tens of milliseconds), and any batch behind one, is validated and appended later, in arrival order: the result then has ``deferred`` set, the
        real result to await.
        """
        offload = self._offload
        if self._tail is not None or self._recompression.wanted(records) or (
            offload is not None and records is not None and offload.takes(records)
        ) or (defer_io and self.log.directory_pending):
            previous = self._tail
            task = asyncio.get_running_loop().create_task(
                self._append_later(records, produce_version, previous))
            self._tail = task
            task.add_done_callback(self._forget_tail)
            return AppendResult(ErrorCode.NONE, deferred=task)
        checked = self._validate(records)
        if isinstance(checked, AppendResult):
            return checked
        assert records is not None  # _validate refuses None
        return self._append_valid(records, checked, produce_version, queue=defer_io)

    def retire(self) -> None:
        """The partition is being deleted: appends still waiting for validation fail."""
        self._retired = True
        self.wake_waiters()

    def _forget_tail(self, task: asyncio.Task[AppendResult]) -> None:
        if self._tail is task:
            self._tail = None

    async def _append_later(self, records: memoryview | None, produce_version: int,
                            previous: asyncio.Task[AppendResult] | None) -> AppendResult:
        offload = self._offload
        checked: BatchHeader | tuple[BatchHeader, bytearray] | AppendResult | None = None
        produced = records
        if self._recompression.wanted(records):
            # Validated and recompressed off the loop, overlapping earlier ones.
            if offload is not None:
                checked = await offload.run(self._recompressed, records)
            else:
                checked = await asyncio.to_thread(self._recompressed, records)
        elif offload is not None and records is not None and offload.takes(records):
            checked = await offload.run(self._validate, records)  # overlaps earlier ones
        if previous is not None:
            await asyncio.wait([previous])  # its outcome is its own caller's
        if self.log.directory_pending:  # a first append: its directory made off the loop
            await asyncio.to_thread(self.log.prepare_directory)
        if checked is None:
            checked = self._validate(records)
        if isinstance(checked, AppendResult):
            return checked
        if not isinstance(checked, BatchHeader):  # (header, the recompressed batch)
            checked, rewritten = checked
            records = memoryview(rewritten)
        if self._retired:  # deleted (or the server closing) while this batch was checked
            return AppendResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                message=f"partition {self.topic}-{self.index} is gone")
        assert records is not None and produced is not None  # _validate refuses None
        return self._append_valid(records, checked, produce_version,
                                  produced_codec=produced[ATTRIBUTES_OFFSET + 1] & COMPRESSION_MASK)

    def _recompressed(self, records: memoryview | None
                      ) -> tuple[BatchHeader, bytearray] | BatchHeader | AppendResult:
        """The validated batch in the topic's codec (logserver.recompress), or why not
        (on a pool thread)."""
        checked = self._validate(records)
        recompression = self._recompression
        if isinstance(checked, AppendResult) or recompression.codec is None \
                or checked.compression == recompression.codec:
            return checked  # refused, or compression.type changed meanwhile
        assert records is not None
        try:
            rewritten = recompression.apply(records, checked, self.max_message_bytes)
        except CorruptBatchError as exc:
            return AppendResult(ErrorCode.CORRUPT_MESSAGE, message=str(exc))
        if len(rewritten) > self.max_message_bytes:
            return AppendResult(ErrorCode.MESSAGE_TOO_LARGE,
                                message=f"batch recompressed to {recompression.codec.name} is "
                                        f"{len(rewritten)} bytes, more than max.message.bytes "
                                        f"{self.max_message_bytes}")
        return parse_header(rewritten), rewritten

    def _validate(self, records: memoryview | None) -> BatchHeader | AppendResult:
        """The batch's header if it may be stored, else the refusal (safe off the loop)."""
        if records is None or len(records) == 0:
            return AppendResult(ErrorCode.CORRUPT_MESSAGE, message="no record batch")
        if len(records) > self.max_message_bytes:
            return AppendResult(ErrorCode.MESSAGE_TOO_LARGE,
                                message=f"batch of {len(records)} bytes exceeds max.message.bytes "
                                        f"{self.max_message_bytes}")
        try:
            # Every record's framing, and a compressed payload inflated under a cap
            # (decompression bombs), before anything is stored.
            return validate_batch(records, max_uncompressed_bytes=self.max_message_bytes,
                                  reject_null_keys=self.config.compact).header
        except CorruptBatchError as exc:
            return AppendResult(ErrorCode.CORRUPT_MESSAGE, message=str(exc))
        except RecordErrorsError as exc:
            return AppendResult(ErrorCode.INVALID_RECORD, message=str(exc),
                                record_errors=exc.record_errors)
        except InvalidRecordError as exc:
            return AppendResult(ErrorCode.INVALID_RECORD, message=str(exc))

    def _append_valid(self, records: memoryview, header: BatchHeader, produce_version: int,
                      produced_codec: int | None = None, *, queue: bool = True) -> AppendResult:
        """``produced_codec``: the codec the producer used, when the broker recompressed."""
        codec = header.compression if produced_codec is None else produced_codec
        if codec == Compression.ZSTD and produce_version < ZSTD_MIN_PRODUCE_VERSION:
            return AppendResult(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                                message="zstd needs Produce v7 or later")
        if header.has_producer_id:
            decision = self.log.check_producer(header)
            if decision.verdict != Verdict.APPEND:
                return self._refuse(decision)
        if not self.log_append_time:
            problem = self._timestamp_problem(header.base_timestamp, header.max_timestamp)
            if problem is not None:
                return AppendResult(ErrorCode.INVALID_TIMESTAMP, message=problem)
        append_time = -1
        if self.log_append_time:
            append_time = int(time.time() * 1000)
            set_log_append_time(records, 0, append_time)
        # Without defer_io (acks=0, the coordinators) the write is done on return: an
        # acks=0 write is seen by the connection's next request, as in Kafka.
        base_offset = self.log.append(records, header, leader_epoch=self.leader_epoch, queue=queue)
        self.bytes_in += len(records)
        self.messages_in += header.record_count
        self.wake_waiters()
        return AppendResult(ErrorCode.NONE, base_offset, append_time, self.log.log_start_offset)

    def _timestamp_problem(self, first: int, largest: int) -> str | None:
        """KIP-937 for CreateTime: the batch's largest timestamp (recomputed from its
        records by validation) within ``message.timestamp.after.max.ms`` of now, its
        first within ``message.timestamp.before.max.ms``. -1 is "no timestamp"."""
        now = int(time.time() * 1000)
        if largest >= 0 and largest - now > self._after_max_ms:
            return (f"timestamp {largest} is {largest - now} ms ahead of the broker's clock; "
                    f"message.timestamp.after.max.ms is {self._after_max_ms}")
        if first >= 0 and now - first > self._before_max_ms:
            return (f"timestamp {first} is {now - first} ms behind the broker's clock; "
                    f"message.timestamp.before.max.ms is {self._before_max_ms}")
        return None

    # -- transactions -------------------------------------------------------------------

    def stable_offset_for_fetch(self, fetch_offset: int) -> int:
        """The LSO for a read_committed fetch: open transactions are producer state
        (snapshotted), so this never waits for a scan of the log."""
        return self.last_stable_offset

    def aborted_txns(self, start: int, end: int) -> Sequence[AbortedTxnEntry]:
        """Aborted transactions overlapping [start, end) (a read_committed fetch)."""
        return self.log.aborted_txns(start, end)

    def active_producers(self) -> list[tuple[int, int, int, int, int, int]]:
        """DescribeProducers: (id, epoch, last sequence, last timestamp, first offset of
        its open transaction or -1, coordinator epoch of its last marker or -1)."""
        ongoing = self.log.ongoing_txns()
        return [(pid, epoch, seq, ts, ongoing.get(pid, -1), coordinator_epoch)
                for pid, epoch, seq, ts, coordinator_epoch in self.log.active_producers()]

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset(self.high_watermark)

    def append_marker(self, producer_id: int, producer_epoch: int, *, commit: bool,
                      coordinator_epoch: int) -> AppendResult:
        """Write a commit or abort marker for a producer's transaction (coordinator only).

        A marker from an older coordinator epoch than the producer's last one here is
        refused (TRANSACTION_COORDINATOR_FENCED): a coordinator that lost its
        ``__transaction_state`` partition (a zombie) cannot end the transaction. Checked
        and appended with no await between, so two markers cannot race past the check."""
        last = self.log.coordinator_epoch(producer_id)
        if coordinator_epoch < last:
            return AppendResult(ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                                message=f"marker for producer {producer_id} from coordinator "
                                f"epoch {coordinator_epoch}, older than {last}")
        now = int(time.time() * 1000)
        batch = build_marker(producer_id, producer_epoch, commit=commit,
                             coordinator_epoch=coordinator_epoch, timestamp_ms=now)
        header = parse_header(batch)
        base_offset = self.log.append(memoryview(batch), header, leader_epoch=self.leader_epoch)
        self.wake_waiters()
        return AppendResult(ErrorCode.NONE, base_offset, -1, self.log.log_start_offset)

    def _refuse(self, decision: Decision) -> AppendResult:
        if decision.verdict == Verdict.DUPLICATE:
            # A retry of a batch already in the log: acknowledge it where it already is.
            return AppendResult(ErrorCode.NONE, decision.base_offset,
                                decision.timestamp if self.log_append_time else -1,
                                self.log.log_start_offset)
        error = _VERDICT_ERRORS[decision.verdict]
        # Rare, and what a client does next (librdkafka bumps its epoch on a sequence
        # gap) is read against it after a fault run's violation: logged, with the detail.
        log.info("%s-%d: %s: %s", self.topic, self.index, error.name, decision.detail)
        return AppendResult(error, message=decision.detail or error.name)

    # -- fetch --------------------------------------------------------------------------

    def fetch(self, offset: int, max_bytes: int, *, min_one: bool,
              api_version: int, upper_bound: int | None = None,
              replica: bool = False) -> tuple[int, Records]:
        """Consumers read below the high watermark (and read_committed ones below
        ``upper_bound``, the last stable offset), follower replicas (``replica``) to the
        log end."""
        upper = upper_bound
        if not replica and self.replicated_hw is not None:
            upper = self.high_watermark if upper is None else min(upper, self.high_watermark)
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
        self.bytes_out += records.length if isinstance(records, FileRegion) else len(records)
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
            # producer state, open transactions and the .txnindex follow inside the log
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

    @property
    def waiting_fetches(self) -> int:
        """Long-poll fetches parked on this partition (Kafka's fetch purgatory)."""
        return len(self._waiters)

    def wake_waiters(self) -> None:
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for future in waiters:
                if not future.done():
                    future.set_result(None)

