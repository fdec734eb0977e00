"""The log of one partition: ordered segments in ``<data>/<topic>-<partition>/``.

Threading contract: every method runs on the broker's event-loop thread except
``flush()``, which may run concurrently on a worker thread. ``flush`` only touches a
lock-protected set of segments written since the last flush and fsyncs ``dup()``s of
their descriptors, so a roll, truncation or retention delete on the loop thread can
never make it fsync a closed or reused descriptor. Segments removed by retention or
truncation keep their log descriptor open for ``RETIRED_FD_GRACE_S`` seconds, so an
``(fd, position, length)`` handed to a pending sendfile stays valid.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import shutil
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
from logserver.log.config import LogConfig
from logserver.log.errors import OffsetOutOfRangeError
from logserver.log.fsutil import fsync_dir, fsync_path
from logserver.log.index import OffsetIndex, TimeIndex
from logserver.log.producer_state import SNAPSHOT_SUFFIX, Decision, ProducerStateManager
from logserver.log.segment import LOG_SUFFIX, Segment

logger = logging.getLogger(__name__)

__all__ = ["LEADER_EPOCH", "RETIRED_FD_GRACE_S", "Log"]

LEADER_EPOCH = 0  # policy (B) of kafka-compat.md: constant epoch 0 stamped on every batch
RETIRED_FD_GRACE_S = 60.0
_I64 = struct.Struct(">q")
_TEMP_SUFFIXES = (".tmp", ".cleaned", ".swap", ".deleted")
# Test hook (logserver.log.faults): told (path, size) of segment data each flush made durable.
fsync_observer: Callable[[list[tuple[Path, int]]], None] | None = None


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
        clean_shutdown: bool = True,
        allow_data_loss: bool = True,
    ) -> None:
        """Open (and if needed recover) the log in ``directory``.

        ``allow_data_loss=False`` (what the server passes unless
        ``log.recovery.allow.data.loss=true``) makes recovery raise CorruptLogError
        instead of truncating damage that is not a torn tail; the default keeps Kafka's
        behaviour (truncate at the first bad batch, drop everything after it).
        ``recovery_actions`` lists what recovery did, one line each.
        """
        self.directory = Path(directory)
        self.config = config or LogConfig()
        self.topic = topic
        self.partition = partition
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()  # guards _unflushed, _dir_dirty, recovery_point
        self._unflushed: dict[Segment, None] = {}  # ordered set of segments to fsync
        self._dir_dirty = False
        self._truncations = 0
        self._retired: list[tuple[float, Segment]] = []
        self._deleted_paths: list[Path] = []
        self._closed = False
        self.segments: list[Segment] = []
        self._bases: list[int] = []  # segment base offsets, for bisect
        self.last_append_ms = -1
        self.producer_state = ProducerStateManager(
            self.directory, self.config.producer_id_expiration_ms
        )
        self.recovery_actions: list[str] = []
        try:
            self._load(recovery_point, clean_shutdown, allow_data_loss)
        except BaseException:
            for seg in self.segments:
                seg.close()
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
    def active_segment(self) -> Segment:
        return self.segments[-1]

    @property
    def log_start_offset(self) -> int:
        return self.segments[0].base_offset

    @property
    def log_end_offset(self) -> int:
        """The next offset to assign (LEO)."""
        return self.segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        return sum(seg.size for seg in self.segments)

    # -- loading and recovery ---------------------------------------------------------

    def _load(self, recovery_point: int, clean_shutdown: bool, allow_data_loss: bool) -> None:
        bases: list[int] = []
        for path in sorted(self.directory.iterdir()):
            name = path.name
            if name.endswith(_TEMP_SUFFIXES):
                logger.warning("%s: removing leftover temporary file %s", self.directory, name)
                path.unlink()
            elif name.endswith(LOG_SUFFIX):
                try:
                    bases.append(int(name[: -len(LOG_SUFFIX)]))
                except ValueError:
                    logger.warning("%s: ignoring unexpected file %s", self.directory, name)
        bases.sort()
        base_set = set(bases)
        for suffix in (OffsetIndex.suffix, TimeIndex.suffix):
            for path in self.directory.glob("*" + suffix):
                with contextlib.suppress(ValueError):
                    if int(path.name[: -len(suffix)]) not in base_set:
                        logger.warning(
                            "%s: removing index without a log: %s", self.directory, path.name
                        )
                        path.unlink()

        # Segments from the one holding the recovery point on were not known durable.
        first_unflushed = max(bisect.bisect_right(bases, recovery_point) - 1, 0)
        expected: int | None = None
        actions = self.recovery_actions
        for i, base in enumerate(bases):
            data_follows = any(
                (self.directory / f"{later:020d}{LOG_SUFFIX}").stat().st_size
                for later in bases[i + 1 :]
            )
            seg = Segment(self.directory, base, self.config, active=False)
            try:
                if not clean_shutdown and i >= first_unflushed:
                    truncated = seg.recover(
                        0, expected, allow_data_loss=allow_data_loss, data_follows=data_follows
                    )
                    # What was read back may sit only in the page cache (the process died,
                    # not the machine): the first flush must fsync it before the recovery
                    # point moves past it.
                    self._unflushed[seg] = None
                else:
                    before = seg.size
                    if seg.load(allow_data_loss=allow_data_loss, data_follows=data_follows):
                        self._unflushed[seg] = None  # rebuilt index files
                        actions.append(f"{seg.path}: rebuilt indexes ({seg.index_problem})")
                    truncated = before - seg.size
            except BaseException:
                seg.close()
                raise
            if seg.last_truncation:
                actions.append(seg.last_truncation)
                if expected is not None and seg.size and seg.base_offset != expected:
                    logger.warning(
                        "%s: segment %d does not continue from offset %d",
                        self.directory,
                        base,
                        expected,
                    )
            if not seg.size and (
                (self.segments and seg.base_offset != expected)  # does not continue the log
                or (not truncated and i < len(bases) - 1)  # an empty one in the middle
            ):
                logger.warning("%s: deleting empty segment %s", self.directory, seg.path.name)
                actions.append(f"{seg.path}: deleted (empty)")
                self._unflushed.pop(seg, None)
                seg.delete()
            else:
                self._add_segment(seg)
                expected = seg.next_offset
            if truncated:
                for later in bases[i + 1 :]:
                    later_path = self.directory / f"{later:020d}{LOG_SUFFIX}"
                    with contextlib.suppress(OSError):
                        actions.append(
                            f"{later_path}: deleted ({later_path.stat().st_size} bytes after "
                            f"the truncation at offset {expected})"
                        )
                    self._delete_segment_files(later)
                if bases[i + 1 :]:
                    logger.warning(
                        "%s: deleted %d segments after the truncation at offset %d: %s",
                        self.directory,
                        len(bases) - i - 1,
                        expected,
                        bases[i + 1 :],
                    )
                break
        if not self.segments:
            start = expected if expected is not None else 0
            self._add_segment(Segment(self.directory, start, self.config, active=True))
        self.active_segment.make_active()
        if self._unflushed:
            self._dir_dirty = True
        if not clean_shutdown:
            # INFO: every truncation or index rebuild was already logged at WARNING.
            logger.info(
                "%s: recovered after unclean shutdown from recovery point %d: "
                "log end offset %d, %d segments",
                self.directory,
                recovery_point,
                self.log_end_offset,
                len(self.segments),
            )
        self._load_producer_state()

    def _add_segment(self, seg: Segment) -> None:
        self.segments.append(seg)
        self._bases.append(seg.base_offset)

    def _delete_segment_files(self, base: int) -> None:
        for suffix in (LOG_SUFFIX, OffsetIndex.suffix, TimeIndex.suffix):
            with contextlib.suppress(FileNotFoundError):
                (self.directory / f"{base:020d}{suffix}").unlink()

    def _load_producer_state(self) -> None:
        """Latest snapshot <= LEO, then replay the headers after it (Kafka's way)."""
        ps = self.producer_state
        leo = self.log_end_offset
        snap = ps.load_latest_snapshot(leo)
        start = self.log_start_offset if snap is None or snap < self.log_start_offset else snap
        if snap is None or snap < self.log_start_offset:
            ps.reset(start)
        if start < leo:
            count = ps.replay((header for _, header in self._iter_headers(start)), _now_ms())
            logger.info(
                "%s: producer state replayed %d batches from offset %d (snapshot %s)",
                self.directory,
                count,
                start,
                snap,
            )
        ps.map_end_offset = leo

    def _iter_headers(self, offset: int) -> Iterator[tuple[Segment, BatchHeader]]:
        """Headers of every batch from the one holding ``offset`` to the end."""
        for seg in self.segments[self._segment_index(offset) :]:
            pos = 0
            if seg.base_offset < offset:
                found = seg.translate_offset(offset)
                if found is None:
                    continue
                pos = found[0]
            for _, header in seg.iter_headers(pos):
                yield seg, header

    # -- append -------------------------------------------------------------------------

    def check_producer(self, header: BatchHeader) -> Decision:
        """Idempotence verdict for a batch about to be appended (see ProducerStateManager)."""
        return self.producer_state.check(header)

    def append(
        self, batch: bytearray | memoryview, header: BatchHeader, *, now_ms: int | None = None
    ) -> int:
        """Assign offsets to one validated batch and write it; returns its base offset.

        Patches base offset and partition leader epoch in place in ``batch`` (a writable
        buffer holding exactly one batch; both fields lie outside the CRC). The max
        timestamp is re-read from the bytes, so a header parsed before the broker
        applied LogAppendTime is fine. Producer state is updated here; call
        ``check_producer`` first.
        """
        now = _now_ms() if now_ms is None else now_ms
        max_ts = _I64.unpack_from(batch, MAX_TIMESTAMP_OFFSET)[0]
        if max_ts != header.max_timestamp:
            header = header._replace(max_timestamp=max_ts)
        with self._lock:
            seg = self.segments[-1]
            base = seg.next_offset
            next_offset = base + header.last_offset_delta + 1
            size = len(batch)
            if seg.should_roll(size, header.max_timestamp, next_offset - 1, now):
                seg = self._roll_locked(now)
            set_base_offset(batch, 0, base)
            set_partition_leader_epoch(batch, 0, LEADER_EPOCH)
            self._unflushed[seg] = None
            seg.append(batch, base, header.max_timestamp, next_offset)
        if header.producer_id >= 0:
            self.producer_state.update(header, base, now)
        else:
            self.producer_state.map_end_offset = next_offset
        self.last_append_ms = now
        if self._retired:
            self._reap_retired()
        return base

    def roll(self, now_ms: int | None = None) -> Segment:
        """Start a new segment at the log end offset (no-op if the active one is empty)."""
        with self._lock:
            return self._roll_locked(_now_ms() if now_ms is None else now_ms)

    def _roll_locked(self, now: int) -> Segment:
        old = self.segments[-1]
        if not old.size:
            return old
        new = Segment(self.directory, old.next_offset, self.config, active=True, created_ms=now)
        old.make_inactive()
        self._unflushed[old] = None  # its trimmed indexes need an fsync too
        self._add_segment(new)
        self._dir_dirty = True
        logger.info("%s: rolled new segment at offset %d", self.directory, new.base_offset)
        self.producer_state.remove_expired(now)
        self.producer_state.take_snapshot()
        return new

    # -- read -----------------------------------------------------------------------------

    def _segment_index(self, offset: int) -> int:
        return max(bisect.bisect_right(self._bases, offset) - 1, 0)

    def read(
        self,
        offset: int,
        max_bytes: int,
        upper_bound_offset: int | None = None,
        *,
        min_one: bool = True,
    ) -> tuple[int, int, int] | None:
        """``(fd, position, length)`` of whole batches from the one holding ``offset``.

        Raises OffsetOutOfRangeError below log start or above LEO; None when there is
        nothing to return (offset == LEO, or at/after ``upper_bound_offset``, the high
        watermark). With ``min_one`` (default) the first batch is whole even above
        ``max_bytes`` (KIP-74); without it a first batch above ``max_bytes`` gives None.
        The first batch may start before ``offset`` (a fetch from inside a batch gets
        the whole batch). The region never crosses a segment boundary.
        """
        leo = self.log_end_offset
        if offset < self.log_start_offset or offset > leo:
            raise OffsetOutOfRangeError(offset, self.log_start_offset, leo)
        upper = leo if upper_bound_offset is None else min(upper_bound_offset, leo)
        if offset >= upper:
            return None
        segments = self.segments
        for i in range(self._segment_index(offset), len(segments)):
            seg = segments[i]
            if seg.base_offset >= upper:
                return None
            if upper >= seg.next_offset:
                max_position = seg.size
            else:
                found = seg.translate_offset(upper)
                max_position = found[0] if found else seg.size
            region = seg.read_region(offset, max_bytes, max_position, min_one=min_one)
            if region is not None:
                return region
            if offset < seg.next_offset:
                return None  # the batch holding offset straddles the upper bound
        return None

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp``, or None.

        ListOffsets by time. The batch is found via the time index; only that one batch
        is decoded (when it uses CreateTime) to pick the exact record, as Kafka does. A
        batch that fails to decode is answered at batch granularity (its base offset
        and max timestamp).
        """
        for seg in self.segments:
            if seg.max_timestamp < timestamp:
                continue
            found = seg.find_offset_by_timestamp(timestamp)
            if found is None:
                continue
            position, base_offset, max_ts = found
            return self._first_record_at_or_after(seg, position, timestamp, base_offset, max_ts)
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the earliest record holding the largest timestamp.

        ListOffsets MAX_TIMESTAMP (-3, KIP-734); None for an empty log or one without
        timestamps. Segments track their max and where it was first reached, so only
        the one batch holding it is read (and decoded for the exact record).
        """
        best: Segment | None = None
        for seg in self.segments:
            if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
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
        header = parse_header(os.pread(seg.fd, BATCH_HEADER_SIZE, position))
        if header.attributes & TIMESTAMP_TYPE_MASK:
            return base_offset, max_ts  # LogAppendTime: every record carries max_ts
        try:
            data = os.pread(seg.fd, header.size, position)
            _, records = decode_batch(data, verify_crc=False)
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

    def flush(self) -> int:
        """fsync everything written so far; returns the new recovery point (safe off-thread).

        The log end offset is captured before the fsyncs, so everything below the
        returned offset is durable. Only segments written or rolled since the last
        flush are synced (usually just the active one's log file); the directory is
        synced when segments were created.
        """
        with self._lock:
            if self._closed:
                return self.recovery_point
            leo = self.segments[-1].next_offset
            generation = self._truncations
            segments = list(self._unflushed)
            self._unflushed.clear()
            dir_dirty, self._dir_dirty = self._dir_dirty, False
            fds: list[int] = []
            paths: list[Path] = []
            synced = [(seg.path, seg.size) for seg in segments]
            try:
                for seg in segments:
                    fd, index_paths = seg.flush_targets()
                    fds.append(os.dup(fd))
                    paths.extend(index_paths)
            except OSError:
                for fd in fds:
                    os.close(fd)
                raise
        try:
            for fd in fds:
                os.fsync(fd)
            for path in paths:  # a segment retired meanwhile needs no fsync
                fsync_path(path, missing_ok=True)
            if dir_dirty:
                fsync_dir(self.directory)
        except OSError:
            with self._lock:
                for seg in segments:
                    if seg.fd >= 0:
                        self._unflushed[seg] = None
                self._dir_dirty = self._dir_dirty or dir_dirty
            raise
        finally:
            for fd in fds:
                os.close(fd)
        if fsync_observer is not None:
            fsync_observer(synced)
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
        if offset >= self.log_end_offset:
            return self.log_end_offset
        offset = max(offset, self.log_start_offset)
        with self._lock:
            self._truncations += 1
            keep = self._segment_index(offset)
            if self.segments[keep].base_offset >= offset and keep > 0:
                keep -= 1  # offset is a segment base: keep the previous segment whole
            doomed = self.segments[keep + 1 :]
            del self.segments[keep + 1 :]
            del self._bases[keep + 1 :]
            for seg in doomed:
                self._unflushed.pop(seg, None)
                self._retire(seg)
            seg = self.segments[keep]
            seg.make_active()
            removed = seg.truncate_to(offset) + sum(s.size for s in doomed)
            self._unflushed[seg] = None
            self._dir_dirty = True
            self.recovery_point = min(self.recovery_point, seg.next_offset)
        logger.warning(
            "%s: truncated to offset %d (asked %d): %d bytes, %d whole segments removed",
            self.directory,
            self.log_end_offset,
            offset,
            removed,
            len(doomed),
        )
        self._load_producer_state()
        return self.log_end_offset

    def delete_old_segments(self, now_ms: int | None = None, *, keep_files: bool = False) -> int:
        """Retention: drop whole segments older than retention.ms or beyond retention.bytes.

        Like Kafka, age is the segment's largest record timestamp. The active segment is
        never deleted (it takes the appends; it goes once it has rolled). Returns the
        number of segments deleted; the log start offset moves to the first remaining
        segment. ``keep_files`` renames each deleted ``.log`` to ``.log.deleted`` instead
        of unlinking it (for the delete hook); ``take_deleted_paths`` hands those out.
        """
        now = _now_ms() if now_ms is None else now_ms
        cfg = self.config
        count = 0
        if cfg.retention_ms >= 0:
            for seg in self.segments:
                ts = seg.max_timestamp
                if ts < 0:  # no record timestamps: file age, as Kafka does
                    ts = int(os.fstat(seg.fd).st_mtime * 1000)
                if not seg.size or now - ts <= cfg.retention_ms:
                    break
                count += 1
        if cfg.retention_bytes >= 0:
            excess = self.size_bytes - cfg.retention_bytes
            by_size = 0
            for seg in self.segments[:-1]:
                if excess < seg.size:
                    break
                excess -= seg.size
                by_size += 1
            count = max(count, by_size)
        if not count:
            return 0
        with self._lock:
            count = min(count, len(self.segments) - 1)
            if count <= 0:
                return 0
            doomed = self.segments[:count]
            del self.segments[:count]
            del self._bases[:count]
            for seg in doomed:
                self._unflushed.pop(seg, None)
                self._retire(seg, keep_log=keep_files)
            self._dir_dirty = True
        logger.info(
            "%s: retention deleted %d segments; log start offset now %d",
            self.directory,
            count,
            self.log_start_offset,
        )
        return count

    def delete_segments_below(self, offset: int) -> int:
        """Drop the whole segments whose records all lie below ``offset`` (never the active
        one); the log start offset moves to the first remaining segment. Returns the
        number of segments dropped."""
        with self._lock:
            count = 0
            for seg in self.segments[:-1]:
                if seg.next_offset > offset:
                    break
                count += 1
            if not count:
                return 0
            doomed = self.segments[:count]
            del self.segments[:count]
            del self._bases[:count]
            for seg in doomed:
                self._unflushed.pop(seg, None)
                self._retire(seg)
            self._dir_dirty = True
        logger.info("%s: deleted %d segments below offset %d; log start offset now %d",
                    self.directory, count, offset, self.log_start_offset)
        return count

    def _retire(self, seg: Segment, *, keep_log: bool = False) -> None:
        kept = seg.retire(keep_log=keep_log)
        if kept is not None:
            self._deleted_paths.append(kept)
        self._retired.append((time.monotonic(), seg))

    def take_deleted_paths(self) -> list[Path]:
        """Paths of ``.log.deleted`` files kept by retention since the last call."""
        paths, self._deleted_paths = self._deleted_paths, []
        return paths

    def _reap_retired(self, force: bool = False) -> None:
        horizon = time.monotonic() - RETIRED_FD_GRACE_S
        keep = []
        for retired_at, seg in self._retired:
            if force or retired_at < horizon:
                seg.close_fd()
            else:
                keep.append((retired_at, seg))
        self._retired = keep

    # -- lifecycle ---------------------------------------------------------------------

    def close(self, *, flush: bool = True) -> None:
        """Clean close: flush, snapshot producer state, trim and sync indexes, close fds.

        ``flush=False`` (the partition is about to be deleted) skips every fsync.
        """
        if self._closed:
            return
        if flush:
            self.flush()
        with self._lock:
            self._closed = True
            self.producer_state.map_end_offset = self.log_end_offset
            self.producer_state.take_snapshot(sync=flush)
            for seg in self.segments:
                seg.close(sync=flush and seg.active)
            self._reap_retired(force=True)
            self._unflushed.clear()

    def delete(self) -> None:
        """Close and remove the whole partition directory."""
        self.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def snapshot_files(self) -> list[Path]:
        return sorted(self.directory.glob("*" + SNAPSHOT_SUFFIX))
