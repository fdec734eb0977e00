"""The log of one partition (Kafka's UnifiedLog role), built on its LocalLog.

``LocalLog`` (logserver.log.local_log) holds the ordered segments; ``Log`` adds what
makes them a partition log: offset assignment, producer state (idempotence), the
recovery point and flush bookkeeping, retention decisions, and recovery at open.

Threading contract: appends, reads, rolls and truncation run on the broker's event-loop
thread, except the writes a ``writer`` (logserver.log.append_writer) takes over: offsets
are assigned on the loop (the assigned end offset), the bytes written on the writer
thread, and ``log_end_offset`` (what fetchers and the high watermark see) moves only
once they are written; ``flush()`` runs on the fsync thread; retention (``delete_old_segments``,
``delete_segments_below``) and the cleaner run on a storage worker thread. ``_lock``
makes an append (offsets, write, unflushed mark) atomic against a flush capturing the
log end offset; segment list changes are the LocalLog's, under its own lock (always
taken after this one). Readers pin the segments they touch, so a removed segment stays
readable until its last reader releases it (see logserver.log.segment).
"""

from __future__ import annotations

import concurrent.futures
import errno
import logging
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from kafkaproto.batch import (
    BATCH_HEADER_SIZE,
    MAX_TIMESTAMP_OFFSET,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    CorruptBatchError,
    parse_header,
    set_base_offset,
    set_partition_leader_epoch,
)
from kafkaproto.records import decode_batch
from logserver.log.append_writer import AppendWriter
from logserver.log.config import LogConfig
from logserver.log.deleter import FileDeleter
from logserver.log.errors import LogError, OffsetOutOfRangeError
from logserver.log.fsutil import fsync_dir
from logserver.log.loader import load_segments
from logserver.log.local_log import LocalLog
from logserver.log.producer_state import SNAPSHOT_SUFFIX, Decision, ProducerStateManager
from logserver.log.segment import Segment
from logserver.log.slice import SegmentSlice
from logserver.log.transaction_index import AbortedTxnEntry
from logserver.log.txn_index import (
    COMMIT,
    CONTROL_KEY_SIZE,
    CONTROL_RECORD_SIZE,
    control_coordinator_epoch,
    control_type,
)

logger = logging.getLogger(__name__)

__all__ = ["LEADER_EPOCH", "Log"]

LEADER_EPOCH = 0  # policy (B) of kafka-compat.md: constant epoch 0 stamped on every batch
_I64 = struct.Struct(">q")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Log:
    """Append, read, roll, truncate, retain and recover one partition's segments."""

    def __init__(
        self,
        directory: Path | str,
        config: LogConfig | None = None,
        *,
        topic: str = "",
        partition: int = 0,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = True,
        allow_data_loss: bool = True,
        deleter: FileDeleter | None = None,
        writer: AppendWriter | None = None,
        lazy_directory: bool = False,
        on_create_directory: Callable[[Path], None] | None = None,
        directory_exists: bool | None = None,
    ) -> None:
        """Open (and if needed recover) the log in ``directory``.

        ``allow_data_loss=False`` (what the server passes unless
        ``log.recovery.allow.data.loss=true``) makes recovery raise CorruptLogError
        instead of truncating damage that is not a torn tail; the default keeps Kafka's
        behaviour (truncate at the first bad batch, drop everything after it).
        ``recovery_actions`` lists what recovery did, one line each. ``deleter``
        removes deleted files after ``file.delete.delay.ms`` (default: a shared one).
        ``writer`` takes over the writes of batches of at least ``writer.min_bytes``.
        ``lazy_directory``: a missing ``directory`` is an empty partition, made (and
        ``on_create_directory`` called on it, e.g. to write partition.metadata) by the
        first append, as the segment files are (see Segment, ``lazy``).
        ``directory_exists``: known by the caller (one listing for many partitions).
        """
        if not isinstance(directory, Path):  # (Path(a_path) parses it again: not free)
            directory = Path(directory)
        config = config or LogConfig()
        self.topic = topic
        self.partition = partition
        self._on_create_directory = on_create_directory
        if not lazy_directory:
            directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()  # guards _unflushed, _dir_dirty, recovery_point
        self._closed = False
        self._truncations = 0
        self._deleted_paths: list[Path] = []
        self.last_append_ms = -1
        # Writes handed to the writer thread. Counters only the loop raises (submitted)
        # or only the writer raises (completed), so no lock is needed to compare them.
        self._writer = writer
        self._submitted = self._completed = 0
        self._submitted_bytes = self._completed_bytes = 0
        self._assigned_end = 0  # the next offset to assign while writes are queued
        self._last_write: concurrent.futures.Future[None] | None = None
        self._write_failed: BaseException | None = None
        loaded = load_segments(
            directory,
            config,
            recovery_point,
            clean_shutdown=clean_shutdown,
            allow_data_loss=allow_data_loss,
            directory_exists=directory_exists if lazy_directory else None,
        )
        self._local = LocalLog(directory, config, loaded.segments, deleter=deleter)
        if loaded.segments[-1].lazy:
            loaded.segments[-1].before_create = self.ensure_directory
        # A partition never written has no directory yet: its first append makes it,
        # with an fsync of the data directory (logserver.partition does that off the loop).
        self.directory_pending = loaded.no_directory
        self._local.advance_start(log_start_offset)  # a checkpointed DeleteRecords
        self._unflushed: dict[Segment, None] = dict.fromkeys(loaded.unflushed)
        self._dir_dirty = bool(loaded.unflushed)
        self.recovery_actions: list[str] = loaded.actions
        self.producer_state = ProducerStateManager(directory, config.producer_id_expiration_ms)
        try:
            if not clean_shutdown:
                # INFO: every truncation or index rebuild was already logged at WARNING.
                logger.info(
                    "%s: recovered after unclean shutdown from recovery point %d: "
                    "log end offset %d, %d segments",
                    directory,
                    recovery_point,
                    self.log_end_offset,
                    len(loaded.segments),
                )
            if loaded.no_directory:
                self.producer_state.reset(log_start_offset)  # nothing written, no snapshot
            else:
                stale = [seg for seg in loaded.segments if seg.txn_index_stale]
                self._load_producer_state(stale[0].base_offset if stale else None)
        except BaseException:
            loaded.close()
            raise
        # After a clean shutdown everything on disk was flushed before the marker.
        self.recovery_point = (
            self.log_end_offset if clean_shutdown else min(recovery_point, self.log_end_offset)
        )

    def __repr__(self) -> str:
        return (
            f"Log({self.directory.name}, offsets [{self.log_start_offset}, "
            f"{self.log_end_offset}), {len(self.segments)} segments)"
        )

    # -- properties ------------------------------------------------------------------

    @property
    def local(self) -> LocalLog:
        """The segments underneath (for the cleaner)."""
        return self._local

    @property
    def directory(self) -> Path:
        return self._local.directory

    @property
    def config(self) -> LogConfig:
        return self._local.config

    @config.setter
    def config(self, config: LogConfig) -> None:
        """A changed topic config applies at once: new segments and the active one's rolls."""
        self._local.config = config
        self._local.active_segment.config = config

    @property
    def segments(self) -> list[Segment]:
        """A snapshot of the segments, oldest first (the last one takes appends)."""
        return list(self._local.segments)

    @property
    def active_segment(self) -> Segment:
        return self._local.active_segment

    @property
    def log_start_offset(self) -> int:
        return self._local.log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The next offset to assign (LEO)."""
        return self._local.log_end_offset

    @property
    def size_bytes(self) -> int:
        return self._local.size_bytes

    # -- loading -------------------------------------------------------------------------

    def _load_producer_state(self, rebuild_txn_from: int | None = None) -> None:
        """Latest snapshot <= LEO, then replay the headers after it (Kafka's way).

        ``rebuild_txn_from``: the base offset of the first segment whose ``.txnindex``
        was reset at load; the replay then starts at a snapshot at or below it and
        writes the aborted transactions of those segments again.
        """
        ps = self.producer_state
        leo = self.log_end_offset
        snap = ps.load_latest_snapshot(leo, rebuild_txn_from)
        start = self.log_start_offset if snap is None or snap < self.log_start_offset else snap
        if snap is None or snap < self.log_start_offset:
            ps.reset(start)
        if start < leo:
            with self._local.pinned_segments(start) as segments:
                count = ps.replay(self._replayed(segments, start, rebuild_txn_from), _now_ms())
            logger.info(
                "%s: producer state replayed %d batches from offset %d (snapshot %s)",
                self.directory,
                count,
                start,
                snap,
            )
        ps.map_end_offset = leo

    def _replayed(self, segments: tuple[Segment, ...], start: int,
                  rebuild_txn_from: int | None) -> Iterator[tuple[BatchHeader, int]]:
        """The replay's batches: (header, a marker's coordinator epoch, else -1). With
        ``rebuild_txn_from``, writes the abort entries of stale ``.txnindex`` files on the
        way (each before its marker reaches the producer state)."""
        ps = self.producer_state
        for seg, pos, header in _iter_headers(segments, start):
            if not (header.is_control and header.is_transactional):
                yield header, -1
                continue
            record = seg.read_at(pos + BATCH_HEADER_SIZE, CONTROL_RECORD_SIZE)
            if rebuild_txn_from is not None and seg.txn_index_stale \
                    and control_type(record) != COMMIT:
                entry = ps.abort_entry(header.producer_id, header.base_offset)
                if entry is not None:
                    seg.add_aborted_txn(AbortedTxnEntry(header.producer_id, entry[0],
                                                        header.base_offset, entry[1]))
            yield header, control_coordinator_epoch(record)
        if rebuild_txn_from is not None:
            for seg in segments:
                seg.txn_index_stale = False

    # -- transactions --------------------------------------------------------------------

    def last_stable_offset(self, high_watermark: int) -> int:
        """The first offset of the oldest open transaction, or ``high_watermark``."""
        return self.producer_state.last_stable_offset(high_watermark)

    def ongoing_txns(self) -> dict[int, int]:
        """Producer id -> first offset of its open transaction."""
        return dict(self.producer_state.ongoing)

    def aborted_txns(self, start: int, end: int) -> list[AbortedTxnEntry]:
        """Aborted transactions overlapping [start, end), from the ``.txnindex`` files
        of the segments from the one holding ``start`` on (Kafka's
        collectAbortedTransactions: stops at the first entry whose LSO reaches ``end``)."""
        found: list[AbortedTxnEntry] = []
        with self._local.pinned_segments(start) as segments:
            for seg in segments:
                if seg.base_offset >= end:
                    break
                entries, complete = seg.txn_index.collect(start, end)
                found.extend(entries)
                if complete:
                    break
        return found

    def _abort_entry(self, header: BatchHeader, batch: bytearray | memoryview,
                     marker_offset: int) -> AbortedTxnEntry | None:
        """The ``.txnindex`` entry of an abort marker about to be appended, else None."""
        if not (header.is_control and header.is_transactional):
            return None
        key = bytes(batch[BATCH_HEADER_SIZE:BATCH_HEADER_SIZE + CONTROL_KEY_SIZE])
        if control_type(key) == COMMIT:
            return None
        entry = self.producer_state.abort_entry(header.producer_id, marker_offset)
        if entry is None:
            return None
        return AbortedTxnEntry(header.producer_id, entry[0], marker_offset, entry[1])

    # -- append -------------------------------------------------------------------------

    def txn_batches(self) -> Iterator[tuple[BatchHeader, bool | None]]:
        """(header, commit) of every transactional batch from the log start; commit is
        None for data batches. A whole-log scan: the log's own transaction state is the
        producer state and the ``.txnindex`` files; this is for tools and comparisons
        (benchmarks/txn_index_rebuild.py)."""
        start = self.log_start_offset
        with self._local.pinned_segments(start) as segments:
            for seg, header in _iter_positioned(segments):
                if not header[1].is_transactional:
                    continue
                pos, batch = header
                if batch.is_control:
                    first = os.pread(seg.fd, CONTROL_KEY_SIZE, pos + BATCH_HEADER_SIZE)
                    yield batch, control_type(first) == COMMIT
                else:
                    yield batch, None

    def check_producer(self, header: BatchHeader) -> Decision:
        """Idempotence verdict for a batch about to be appended (see ProducerStateManager)."""
        if self._write_failed is not None:
            self._forget_failed_writes()
        return self.producer_state.check(header)

    @property
    def assigned_end_offset(self) -> int:
        """The next offset to assign: ahead of ``log_end_offset`` while writes are queued."""
        if self._submitted != self._completed:
            return self._assigned_end
        return self._local.log_end_offset

    def write_barrier(self) -> concurrent.futures.Future[None] | None:
        """A future done once every append so far is written; None if they all are.

        Raises (through the future) the error of a failed queued write.
        """
        if self._submitted == self._completed and self._write_failed is None:
            return None
        return self._last_write

    def append(
        self, batch: bytearray | memoryview, header: BatchHeader, *, now_ms: int | None = None,
        leader_epoch: int | None = LEADER_EPOCH, queue: bool = True,
    ) -> int:
        """Assign offsets to one validated batch and write it; returns its base offset.

        Patches base offset and partition leader epoch in place in ``batch`` (a writable
        buffer holding exactly one batch; both fields lie outside the CRC; a follower's
        copy of the leader's batch keeps its epoch, ``leader_epoch=None``). The max
        timestamp is re-read from the bytes, so a header parsed before the broker
        applied LogAppendTime is fine. Producer state is updated here; call
        ``check_producer`` first. With a writer, a batch of at least its ``min_bytes``
        (unless ``queue`` is False) or any batch behind a queued one is only queued: ``batch`` must
        stay unchanged until ``write_barrier()`` is done, and ``log_end_offset`` moves
        then.
        """
        now = _now_ms() if now_ms is None else now_ms
        max_ts = _I64.unpack_from(batch, MAX_TIMESTAMP_OFFSET)[0]
        if max_ts != header.max_timestamp:
            header = header._replace(max_timestamp=max_ts)
        if self._write_failed is not None:
            self._forget_failed_writes()
        writer = self._writer
        if writer is not None and (
            self._submitted != self._completed or (queue and len(batch) >= writer.min_bytes)
        ):
            base, next_offset = self._append_on_writer(writer, batch, header, max_ts, now,
                                                      leader_epoch)
        else:
            local = self._local
            with self._lock:
                seg = local.active_segment
                base = seg.next_offset
                next_offset = base + header.last_offset_delta + 1
                if seg.should_roll(len(batch), max_ts, next_offset - 1, now):
                    seg = self._roll_locked(now)
                set_base_offset(batch, 0, base)
                if leader_epoch is not None:
                    set_partition_leader_epoch(batch, 0, leader_epoch)
                self._unflushed[seg] = None
                if seg.lazy:  # this append creates the files: the next flush syncs the dir
                    self._dir_dirty = True
                local.append(batch, base, max_ts, next_offset)
                if header.is_control:
                    aborted = self._abort_entry(header, batch, base)
                    if aborted is not None:
                        seg.add_aborted_txn(aborted)
        if header.producer_id >= 0:
            self.producer_state.update(header, base, now, _marker_coordinator_epoch(header, batch))
        else:
            self.producer_state.map_end_offset = next_offset
        self.last_append_ms = now
        return base

    def _append_on_writer(
        self,
        writer: AppendWriter,
        batch: bytearray | memoryview,
        header: BatchHeader,
        max_ts: int,
        now: int,
        leader_epoch: int | None,
    ) -> tuple[int, int]:
        """Assign offsets now and queue the write; returns (base, next offset)."""
        size = len(batch)
        seg = self._local.active_segment
        queued = self._submitted_bytes - self._completed_bytes
        base = self.assigned_end_offset
        next_offset = base + header.last_offset_delta + 1
        if self._needs_roll(seg, size, queued, max_ts, next_offset - 1, now):
            # Rare (once per segment): the roll and the producer snapshot taken with it
            # need every queued write of this log done; the loop waits for them here.
            self.drain_writes()
            if self._write_failed is not None:
                failed = self._write_failed
                self._forget_failed_writes()
                raise OSError(errno.EIO, f"an earlier write failed: {failed}")
            with self._lock:
                seg = self._roll_locked(now)
            base = seg.next_offset
            next_offset = base + header.last_offset_delta + 1
        set_base_offset(batch, 0, base)
        if leader_epoch is not None:
            set_partition_leader_epoch(batch, 0, leader_epoch)
        self._assigned_end = next_offset
        self._submitted_bytes += size
        self._submitted += 1
        aborted = self._abort_entry(header, batch, base) if header.is_control else None
        self._last_write = writer.submit(self._write, batch, base, max_ts, next_offset, size,
                                         aborted)
        return base, next_offset

    def _needs_roll(
        self, seg: Segment, size: int, queued: int, max_ts: int, last_offset: int, now: int
    ) -> bool:
        """``Segment.should_roll`` counting the bytes still queued for the segment."""
        if queued:
            if seg.size + queued > self.config.segment_bytes - size:
                return True
            size += queued
        return seg.should_roll(size, max_ts, last_offset, now)

    def _write(
        self, batch: bytearray | memoryview, base: int, max_ts: int, next_offset: int, size: int,
        aborted: AbortedTxnEntry | None = None,
    ) -> None:
        """On the writer thread: write one batch whose offsets the loop assigned."""
        try:
            if self._write_failed is not None:
                raise OSError(errno.EIO, f"an earlier write failed: {self._write_failed}")
            with self._lock:
                if self._closed:
                    raise LogError(f"{self.directory}: log is closed")
                seg = self._local.active_segment
                if seg.next_offset != base:
                    raise LogError(
                        f"{self.directory}: queued write at offset {base} but the log "
                        f"ends at {seg.next_offset}"
                    )
                if not seg.pin():
                    raise LogError(f"{self.directory}: active segment is closed")
                try:
                    self._unflushed[seg] = None
                    if seg.lazy:
                        self._dir_dirty = True
                    self._local.append(batch, base, max_ts, next_offset)
                    if aborted is not None:
                        seg.add_aborted_txn(aborted)
                finally:
                    seg.unpin()
        except BaseException as exc:
            if self._write_failed is None:
                self._write_failed = exc
                logger.error("%s: write at offset %d failed: %s", self.directory, base, exc)
            raise
        finally:
            self._completed_bytes += size
            self._completed += 1  # last: the loop may append directly once it matches

    def drain_writes(self) -> None:
        """Block until every queued write of this log is done (rolls, truncation, close)."""
        last = self._last_write
        if last is not None and self._submitted != self._completed:
            concurrent.futures.wait([last])

    def _forget_failed_writes(self) -> None:
        """After a failed queued write: once the queue is empty, take the written end as
        the end and rebuild producer state for it (the failed batches' sequences go)."""
        if self._submitted != self._completed:
            return
        self._write_failed = None
        self._last_write = None
        self._load_producer_state()

    def roll(self, now_ms: int | None = None) -> Segment:
        """Start a new segment at the log end offset (no-op if the active one is empty)."""
        self.drain_writes()
        with self._lock:
            return self._roll_locked(_now_ms() if now_ms is None else now_ms)

    def _roll_locked(self, now: int) -> Segment:
        old = self._local.active_segment
        new = self._local.roll(now)
        if new is None:
            return old
        self._unflushed[old] = None  # its trimmed indexes need an fsync too
        self._dir_dirty = True
        self.producer_state.remove_expired(now)
        self.producer_state.take_snapshot()
        return new

    # -- read -----------------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        upper_bound_offset: int | None = None,
        *,
        min_one: bool = True,
    ) -> SegmentSlice | None:
        """A slice of whole batches from the one holding ``offset``; release it when sent.

        Raises OffsetOutOfRangeError below log start or above LEO; None when there is
        nothing to return (offset == LEO, or at/after ``upper_bound_offset``, the high
        watermark). With ``min_one`` (default) the first batch is whole even above
        ``max_bytes`` (KIP-74); without it a first batch above ``max_bytes`` gives None.
        The first batch may start before ``offset`` (a fetch from inside a batch gets
        the whole batch). The slice never crosses a segment boundary, and it pins its
        segment: the bytes stay readable whatever happens to the log until
        ``release()``.
        """
        return self._local.read(offset, max_bytes, upper_bound_offset, min_one=min_one)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp``, or None.

        ListOffsets by time. The batch is found via the time index; only that one batch
        is decoded (when it uses CreateTime) to pick the exact record, as Kafka does. A
        batch that fails to decode is answered at batch granularity (its base offset
        and max timestamp).
        """
        with self._local.pinned_segments() as segments:
            for seg in segments:
                if seg.max_timestamp < timestamp:
                    continue
                found = seg.find_offset_by_timestamp(timestamp)
                if found is None:
                    continue
                position, base_offset, max_ts = found
                return self._first_record_at_or_after(
                    seg, position, timestamp, base_offset, max_ts
                )
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the earliest record holding the largest timestamp.

        ListOffsets MAX_TIMESTAMP (-3, KIP-734); None for an empty log or one without
        timestamps. Segments track their max and where it was first reached, so only
        the one batch holding it is read (and decoded for the exact record).
        """
        with self._local.pinned_segments() as segments:
            best: Segment | None = None
            for seg in segments:
                if seg.max_timestamp >= 0 and (
                    best is None or seg.max_timestamp > best.max_timestamp
                ):
                    best = seg
            if best is None:
                return None
            found = best.translate_offset(best.offset_of_max_timestamp)
            if found is None:
                return None
            position, base_offset, _ = found
            ts = best.max_timestamp
            return self._first_record_at_or_after(best, position, ts, base_offset, ts)

    def _first_record_at_or_after(
        self, seg: Segment, position: int, timestamp: int, base_offset: int, max_ts: int
    ) -> tuple[int, int]:
        """Decode one batch to find its first record with timestamp >= ``timestamp``."""
        header = parse_header(seg.read_at(position, BATCH_HEADER_SIZE))
        if header.attributes & TIMESTAMP_TYPE_MASK:
            return base_offset, max_ts  # LogAppendTime: every record carries max_ts
        try:
            data = seg.read_at(position, header.size)
            _, records = decode_batch(data, verify_crc=False,
                                      max_uncompressed_bytes=self.config.max_message_bytes)
        except (CorruptBatchError, ValueError) as exc:
            logger.warning(
                "%s: cannot decode batch at offset %d for a timestamp lookup: %s",
                self.directory,
                base_offset,
                exc,
            )
            return base_offset, max_ts
        for record in records:
            if record.timestamp >= timestamp:
                return record.offset, record.timestamp
        return base_offset, max_ts

    # -- durability ---------------------------------------------------------------------

    def ensure_directory(self) -> None:
        """Make the partition directory if it is missing (a lazily created partition's
        first file); runs under the segment's or the log's lock, so takes neither."""
        directory = self.directory
        try:
            os.mkdir(directory)
        except FileExistsError:
            self.directory_pending = False
            return
        self.directory_pending = False
        self._dir_dirty = True
        if self._on_create_directory is not None:
            self._on_create_directory(directory)
        fsync_dir(directory.parent)  # the directory's entry, as a creation used to sync it

    def prepare_directory(self) -> None:
        """Make a never-written partition's directory and first segment's files before its
        first append (on a thread: their directory fsyncs take tens of milliseconds on a
        real disk, the event loop's whole budget)."""
        with self._lock:
            if self.directory_pending:
                self.ensure_directory()
            seg = self._local.active_segment
            if seg.lazy:
                seg.fd  # noqa: B018 - opening a lazy segment creates its files

    def unflushed(self) -> tuple[list[Segment], bool]:
        """What the next flush will sync: the segments, and whether the directory too."""
        with self._lock:
            return list(self._unflushed), self._dir_dirty

    def flush(self, *, sync: bool = True) -> int:
        """fsync everything written so far; returns the new recovery point (safe off-thread).

        ``sync=False``: the caller makes the whole file system durable itself before it
        records the recovery point (a clean shutdown's one ``syncfs``), so no fsync here.

        The log end offset is captured before the fsyncs, so everything below the
        returned offset is durable. Only segments written or rolled since the last
        flush are synced (usually just the active one's log file); the directory is
        synced when segments were created. Segments removed meanwhile are skipped.
        """
        with self._lock:
            if self._closed:
                return self.recovery_point
            leo = self._local.log_end_offset
            generation = self._truncations
            segments = [seg for seg in self._unflushed if seg.pin()]
            self._unflushed.clear()
            dir_dirty, self._dir_dirty = self._dir_dirty, False
        try:
            for seg in segments if sync else ():
                seg.fsync()
            if dir_dirty and sync:
                self._local.fsync_directory()
        except OSError:
            with self._lock:
                for seg in segments:
                    self._unflushed[seg] = None
                self._dir_dirty = self._dir_dirty or dir_dirty
            raise
        finally:
            for seg in segments:
                seg.unpin()
        with self._lock:
            if generation == self._truncations and leo > self.recovery_point:
                self.recovery_point = leo
            return self.recovery_point

    # -- truncation and retention ---------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove every batch from the one holding ``offset`` on; returns the new LEO.

        Kafka semantics: batch granularity, so the new LEO is the base offset of the
        batch that held ``offset`` (<= ``offset``). Producer state is reloaded from the
        latest snapshot at or below it.
        """
        self.drain_writes()
        if offset >= self.log_end_offset:
            return self.log_end_offset
        with self._lock:
            self._truncations += 1
            removed, whole = self._local.truncate_to(offset)
            seg = self._local.active_segment
            self._unflushed[seg] = None
            self._dir_dirty = True
            self.recovery_point = min(self.recovery_point, seg.next_offset)
        logger.warning(
            "%s: truncated to offset %d (asked %d): %d bytes, %d whole segments removed",
            self.directory,
            self.log_end_offset,
            offset,
            removed,
            whole,
        )
        self._load_producer_state()
        return self.log_end_offset

    def truncate_fully_and_start_at(self, offset: int) -> int:
        """Drop every segment and continue, empty, at ``offset`` (Kafka's
        truncateFullyAndStartAt: a follower whose log end is below the leader's log
        start fetches from there). Producer state restarts empty; returns the new LEO."""
        self.drain_writes()
        self.ensure_directory()  # the new segment's files are made at once
        with self._lock:
            self._truncations += 1
            old = self._local.segments
            deleted = self._local.restart_at(offset, _now_ms())
            for seg in old:
                self._unflushed.pop(seg, None)
            self._unflushed[self._local.active_segment] = None
            self._dir_dirty = True
            self.recovery_point = offset
        self.producer_state.reset(offset)
        logger.warning("%s: emptied (%d segments removed); the log now starts at offset %d",
                       self.directory, len(deleted), offset)
        return self.log_end_offset

    def close_idle_files(self) -> int:
        """Close the files of older segments nobody read since the previous call."""
        return self._local.close_idle_files()

    @property
    def files_open(self) -> int:
        return self._local.files_open

    def delete_old_segments(self, now_ms: int | None = None, *, keep_files: bool = False) -> int:
        """Retention: drop whole segments older than retention.ms or beyond retention.bytes.

        Like Kafka, age is the segment's largest record timestamp; one in the future
        (a producer's clock, or a year-9999 batch written before
        ``message.timestamp.after.max.ms`` refused them) is no age at all, so the
        segment file's last write stands in for it, as for a segment without
        timestamps; otherwise one such batch would keep its segment, and every later
        one, forever. The active segment is
        never deleted (it takes the appends; it goes once it has rolled). Returns the
        number of segments deleted; the log start offset moves to the first remaining
        segment. Deleted files are renamed ``*.deleted`` and removed after
        ``file.delete.delay.ms``; ``keep_files`` also collects the ``.log.deleted``
        paths for the delete hook (``take_deleted_paths``). Runs on a worker thread.
        """
        now = _now_ms() if now_ms is None else now_ms
        cfg = self.config
        segments = self._local.segments
        count = 0
        if cfg.retention_ms >= 0:
            for seg in segments:
                ts = seg.max_timestamp
                if ts < 0 or ts > now:  # no usable record timestamp: file age
                    if not seg.pin():
                        break
                    try:
                        ts = seg.last_modified_ms()
                    finally:
                        seg.unpin()
                if not seg.size or now - ts <= cfg.retention_ms:
                    break
                count += 1
        if cfg.retention_bytes >= 0:
            excess = sum(seg.size for seg in segments) - cfg.retention_bytes
            by_size = 0
            for seg in segments[:-1]:
                if excess < seg.size:
                    break
                excess -= seg.size
                by_size += 1
            count = max(count, by_size)
        start = self.log_start_offset  # DeleteRecords may have moved it past whole segments
        below_start = 0
        for seg in segments[:-1]:
            if seg.next_offset > start:
                break
            below_start += 1
        count = max(count, below_start)
        count = min(count, len(segments) - 1)
        if count <= 0:
            return 0
        deleted = self._delete_below(segments[count].base_offset)
        if keep_files:
            self._deleted_paths.extend(deleted)
        if deleted:
            logger.info(
                "%s: retention deleted %d segments; log start offset now %d",
                self.directory,
                len(deleted),
                self.log_start_offset,
            )
        return len(deleted)

    def delete_segments_below(self, offset: int) -> int:
        """Delete the whole segments below ``offset``; returns how many went.

        The active segment is never deleted; the log start offset becomes the base of
        the first remaining segment (<= ``offset``). Raises OffsetOutOfRangeError above
        the log end offset.
        """
        if offset > self.log_end_offset:
            raise OffsetOutOfRangeError(offset, self.log_start_offset, self.log_end_offset)
        deleted = self._delete_below(offset)
        if deleted:
            logger.info(
                "%s: deleted %d segments below offset %d; log start offset now %d",
                self.directory,
                len(deleted),
                offset,
                self.log_start_offset,
            )
        return len(deleted)

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: make ``offset`` the log start offset (reads below it get
        OFFSET_OUT_OF_RANGE) and delete the whole segments below it; returns the new log
        start offset. Raises OffsetOutOfRangeError above the log end offset. Runs on a
        worker thread; the caller persists the log start offset (LogManager).
        """
        if offset > self.log_end_offset:
            raise OffsetOutOfRangeError(offset, self.log_start_offset, self.log_end_offset)
        self._local.advance_start(offset)
        self.delete_segments_below(offset)
        return self.log_start_offset

    def _delete_below(self, offset: int) -> list[Path]:
        deleted = self._local.delete_segments_below(offset)
        if deleted:
            with self._lock:
                self._dir_dirty = True
        return deleted

    def take_deleted_paths(self) -> list[Path]:
        """Paths of ``.log.deleted`` files kept by retention since the last call."""
        paths, self._deleted_paths = self._deleted_paths, []
        return paths

    # -- lifecycle ---------------------------------------------------------------------

    def close(self, *, flush: bool = True, sync: bool = True) -> None:
        """Clean close: flush, snapshot producer state, trim and sync indexes.

        ``flush=False`` (the partition is about to be deleted) skips every fsync.
        ``sync=False``: everything is written as for a flushing close, but the caller
        syncs the file system once afterwards (LogManager.close of many partitions).
        Descriptors close as soon as no reader holds their segment.
        """
        if self._closed:
            return
        self.drain_writes()
        if flush:
            self.flush(sync=sync)
        flush = flush and sync  # what remains to fsync here
        with self._lock:
            self._closed = True
            segments = self._local.segments
            if not (len(segments) == 1 and segments[0].lazy):
                # (A partition never written has no producer state: no file per empty
                # partition at shutdown, as no segment file was made for it either.)
                self.producer_state.map_end_offset = self.log_end_offset
                self.producer_state.take_snapshot(sync=flush)
            self._local.close(sync=flush)
            self._unflushed.clear()

    def delete(self) -> Path:
        """Delete the partition: its directory is renamed ``*-delete`` at once (a new
        partition of the same name can be created right after) and removed after
        ``file.delete.delay.ms``; readers holding slices keep their bytes. Returns the
        renamed directory.
        """
        with self._lock:
            self._closed = True
            self._unflushed.clear()
        return self._local.delete_directory()

    def snapshot_files(self) -> list[Path]:
        return sorted(self.directory.glob("*" + SNAPSHOT_SUFFIX))


def _iter_positioned(segments: tuple[Segment, ...]) -> Iterator[tuple[Segment, tuple[int, BatchHeader]]]:
    for seg in segments:
        for found in seg.iter_headers(0):
            yield seg, found


def _marker_coordinator_epoch(header: BatchHeader, batch: bytearray | memoryview) -> int:
    """The coordinator epoch of a marker batch (one record), else -1."""
    if not (header.is_control and header.is_transactional):
        return -1
    return control_coordinator_epoch(bytes(batch[BATCH_HEADER_SIZE:BATCH_HEADER_SIZE
                                                 + CONTROL_RECORD_SIZE]))


def _iter_headers(segments: tuple[Segment, ...],
                  offset: int) -> Iterator[tuple[Segment, int, BatchHeader]]:
    """(segment, position, header) of every batch of ``segments`` (pinned) from the one
    holding ``offset`` on."""
    for seg in segments:
        pos = 0
        if seg.next_offset <= offset:
            continue
        if seg.base_offset < offset:
            found = seg.translate_offset(offset)
            if found is None:
                continue
            pos = found[0]
        for position, header in seg.iter_headers(pos):
            yield seg, position, header
