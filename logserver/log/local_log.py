"""The ordered segments of one partition directory (Kafka's LocalLog).

Only segment mechanics live here: append to the active segment, roll, read a slice,
truncate, replace segments (the cleaner's swap), delete segments below an offset, delete
the whole directory. Offsets, producer state, recovery point and retention decisions
belong to ``Log`` (logserver.log.log), which is built on this.

Threads: appends, rolls, reads and truncation run on the event-loop thread; the
cleaner's ``replace_segments`` and retention's ``delete_segments_below`` run on a
storage worker thread; a flush pins segments from the fsync thread. The segment list is
copy-on-write: every change builds a new tuple under ``_lock`` and publishes it with one
assignment, so a reader takes one consistent snapshot without locking and never sees a
half-swapped list. Whoever touches a segment's descriptor or indexes holds a pin on it
(see Segment), so a segment removed meanwhile stays readable until released.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from logserver.log.config import LogConfig
from logserver.log.deleter import DEFAULT_FILE_DELETE_DELAY_MS, FileDeleter, default_deleter
from logserver.log.errors import LogError, OffsetOutOfRangeError
from logserver.log.fsutil import fsync_dir
from logserver.log.segment import Segment
from logserver.log.slice import SegmentSlice, release_collected

logger = logging.getLogger(__name__)

__all__ = ["DELETE_DIR_SUFFIX", "LocalLog", "SegmentsChangedError"]

DELETE_DIR_SUFFIX = "-delete"  # <topic>-<p>.<uuid>-delete: a deleted partition directory
MAX_FILE_NAME_BYTES = 255  # NAME_MAX of Linux file systems


def delete_dir_name(directory_name: str, unique: str) -> str:
    """``<topic>-<p>.<unique>-delete``, its topic cut so the name fits a file name.

    As Kafka (``LocalLog.logDeleteDirName``): a 249-character topic plus the partition,
    a 32-character id and the suffix would pass 255 bytes; the directory is only ever
    removed, so a shortened topic loses nothing.
    """
    topic, _, partition = directory_name.rpartition("-")
    suffix = f"-{partition}.{unique}{DELETE_DIR_SUFFIX}"
    return topic[:MAX_FILE_NAME_BYTES - len(suffix)] + suffix


class SegmentsChangedError(LogError):
    """The segments a swap was built from are no longer the log's (truncated, deleted)."""


class _View(NamedTuple):
    segments: tuple[Segment, ...]
    bases: tuple[int, ...]


def _view(segments: Sequence[Segment]) -> _View:
    segs = tuple(segments)
    return _View(segs, tuple(seg.base_offset for seg in segs))


class LocalLog:
    """Segments in offset order; the last one (the active segment) takes the appends."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: Sequence[Segment],
        *,
        deleter: FileDeleter | None = None,
    ) -> None:
        """Adopt already opened ``segments`` (at least one; the last one active)."""
        if not segments:
            raise ValueError("a LocalLog needs at least one segment")
        self.directory = directory
        self.config = config
        self._deleter = deleter or default_deleter()
        self._lock = threading.Lock()  # serialises changes of the segment list
        self._view = _view(segments)
        self._closed = False
        self._deleted = False
        # Kafka's logStartOffset when DeleteRecords moved it inside the first segment.
        self._start_floor = 0

    def __repr__(self) -> str:
        return (
            f"LocalLog({self.directory.name}, offsets [{self.log_start_offset}, "
            f"{self.log_end_offset}), {len(self._view.segments)} segments)"
        )

    # -- state ----------------------------------------------------------------------

    @property
    def segments(self) -> tuple[Segment, ...]:
        """A consistent snapshot of the segments, oldest first (the last one is active)."""
        return self._view.segments

    @property
    def active_segment(self) -> Segment:
        return self._view.segments[-1]

    @property
    def log_start_offset(self) -> int:
        return self._start_of(self._view)

    def _start_of(self, view: _View) -> int:
        return max(view.segments[0].base_offset, min(self._start_floor, view.segments[-1].next_offset))

    def advance_start(self, offset: int) -> None:
        """Move the log start offset up to ``offset`` (DeleteRecords); never down."""
        self._start_floor = max(self._start_floor, offset)

    @property
    def log_end_offset(self) -> int:
        """The next offset to assign (LEO)."""
        return self._view.segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        return sum(seg.size for seg in self._view.segments)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def file_delete_delay_ms(self) -> int:
        return int(getattr(self.config, "file_delete_delay_ms", DEFAULT_FILE_DELETE_DELAY_MS))

    @staticmethod
    def _index_of(view: _View, offset: int) -> int:
        return max(bisect.bisect_right(view.bases, offset) - 1, 0)

    def segment_for(self, offset: int) -> Segment:
        """The segment holding ``offset`` (the first one for offsets below the log start)."""
        view = self._view
        return view.segments[self._index_of(view, offset)]

    @contextlib.contextmanager
    def pinned_segments(self, from_offset: int | None = None) -> Iterator[tuple[Segment, ...]]:
        """The current segments (from the one holding ``from_offset``), each pinned.

        For readers that touch descriptors or indexes off the append path; a segment
        removed meanwhile is skipped (it is no longer part of the log).
        """
        view = self._view
        start = 0 if from_offset is None else self._index_of(view, from_offset)
        pinned = tuple(seg for seg in view.segments[start:] if seg.pin())
        try:
            yield pinned
        finally:
            for seg in pinned:
                seg.unpin()

    # -- append and roll ----------------------------------------------------------------

    def append(
        self, batch: bytearray | memoryview, base_offset: int, max_timestamp: int, next_offset: int
    ) -> Segment:
        """Write one batch (offsets already assigned) to the active segment; returns it."""
        seg = self._view.segments[-1]
        seg.append(batch, base_offset, max_timestamp, next_offset)
        return seg

    def roll(self, now_ms: int) -> Segment | None:
        """Start a new segment at the log end offset; None if the active one is empty."""
        with self._lock:
            self._check_open()
            old = self._view.segments[-1]
            if not old.size:
                return None
            new = Segment(
                self.directory, old.next_offset, self.config, active=True, created_ms=now_ms
            )
            old.make_inactive()
            self._view = _view((*self._view.segments, new))
        logger.info("%s: rolled new segment at offset %d", self.directory, new.base_offset)
        return new

    def close_idle_files(self) -> int:
        """Close the files of inactive segments unused since the last call (see
        Segment.close_files_if_idle); returns the descriptors closed."""
        with self._lock:
            return sum(seg.close_files_if_idle() for seg in self._view.segments[:-1])

    @property
    def files_open(self) -> int:
        """Descriptors the segments hold now."""
        return sum(seg.files_open for seg in self._view.segments)

    # -- read -------------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        upper_bound_offset: int | None = None,
        *,
        min_one: bool = True,
    ) -> SegmentSlice | None:
        """A pinned slice of whole batches from the one holding ``offset`` (see Log.read)."""
        release_collected()
        view = self._view
        start, leo = self._start_of(view), view.segments[-1].next_offset
        if offset < start or offset > leo:
            raise OffsetOutOfRangeError(offset, start, leo)
        upper = leo if upper_bound_offset is None else min(upper_bound_offset, leo)
        if offset >= upper:
            return None
        segments = view.segments
        for i in range(self._index_of(view, offset), len(segments)):
            seg = segments[i]
            if seg.base_offset >= upper:
                return None
            if not seg.pin():
                # Removed since the snapshot (retention, compaction): read a fresh one.
                return self.read(offset, max_bytes, upper_bound_offset, min_one=min_one)
            try:
                if upper >= seg.next_offset:
                    max_position = seg.size
                else:
                    found = seg.translate_offset(upper)
                    max_position = found[0] if found else seg.size
                region = seg.read_region(offset, max_bytes, max_position, min_one=min_one)
            except BaseException:
                seg.unpin()
                raise
            if region is not None:
                return SegmentSlice(seg, region[0], region[1])
            seg.unpin()
            if offset < seg.next_offset:
                return None  # the batch holding offset straddles the upper bound
        return None

    # -- removing segments ------------------------------------------------------------

    def _retire(self, doomed: Sequence[Segment]) -> list[Path]:
        """Rename removed segments ``*.deleted`` and drop the log's references.

        Returns the renamed log files; everything renamed is removed after
        ``file.delete.delay.ms`` (readers keep their pinned descriptors until then).
        """
        logs: list[Path] = []
        renamed: list[Path] = []
        for seg in doomed:
            paths = seg.retire()
            renamed.extend(paths)
            if paths and paths[0] == seg.path:
                logs.append(seg.path)
        self._deleter.schedule(renamed, self.file_delete_delay_ms)
        return logs

    def truncate_to(self, offset: int) -> tuple[int, int]:
        """Drop every batch from the one holding ``offset`` on (Kafka's batch granularity).

        Returns (bytes removed, whole segments removed). Readers pinned on a dropped
        segment keep its old bytes; a reader of the kept, now shorter segment sees the
        file end early (a short read), never other bytes.
        """
        with self._lock:
            self._check_open()
            view = self._view
            offset = max(offset, view.segments[0].base_offset)
            keep = self._index_of(view, offset)
            if view.segments[keep].base_offset >= offset and keep > 0:
                keep -= 1  # offset is a segment base: keep the previous segment whole
            doomed = view.segments[keep + 1 :]
            seg = view.segments[keep]
            self._view = _view(view.segments[: keep + 1])
            self._retire(doomed)
            seg.make_active()
            removed = seg.truncate_to(offset) + sum(s.size for s in doomed)
        return removed, len(doomed)

    def restart_at(self, offset: int, now_ms: int) -> list[Path]:
        """Kafka's truncateFullyAndStartAt: every segment goes and the log continues,
        empty, at ``offset`` (a follower whose log ends below its leader's log start).
        Returns the removed segments' log files under their ``.deleted`` names."""
        with self._lock:
            self._check_open()
            doomed = self._view.segments
            new = Segment(self.directory, offset, self.config, active=True, created_ms=now_ms)
            self._view = _view((new,))
            self._start_floor = offset
            return self._retire(doomed)

    def delete_segments_below(self, offset: int) -> list[Path]:
        """Delete the whole segments whose offsets all lie below ``offset``.

        The active segment is never deleted. The log start offset becomes the base
        offset of the first remaining segment (<= ``offset``). Returns the deleted
        segments' log files under their ``.deleted`` names.
        """
        with self._lock:
            self._check_open()
            view = self._view
            count = 0
            for seg in view.segments[:-1]:
                if seg.next_offset > offset:
                    break
                count += 1
            if not count:
                return []
            doomed = view.segments[:count]
            self._view = _view(view.segments[count:])
            return self._retire(doomed)

    def replace_segments(self, old: Sequence[Segment], new: Sequence[Segment]) -> None:
        """Swap ``old`` (consecutive segments of this log) for ``new`` (the cleaner's).

        Pairwise: ``new[i]`` was built under a ``file_suffix`` beside ``old[i]`` and
        covers the same offsets from the same base. Each pair is swapped crash-safely
        (old indexes renamed away, the old log hard-linked to ``.deleted``, the new log
        renamed over the live name in one step), the list is published at once, and
        readers still holding an old segment keep its bytes until they release it.
        Raises SegmentsChangedError (and changes nothing) if ``old`` is no longer part
        of the log, e.g. after a truncation or a deletion.
        """
        if len(old) != len(new) or any(
            o.base_offset != n.base_offset for o, n in zip(old, new, strict=True)
        ):
            raise ValueError("replace_segments swaps segments pairwise, by base offset")
        if not old:
            return
        renamed: list[Path] = []
        with self._lock:
            if self._closed:
                raise SegmentsChangedError(f"{self.directory}: closed")
            segments = self._view.segments
            try:
                first = segments.index(old[0])
            except ValueError:
                raise SegmentsChangedError(
                    f"{self.directory}: segment {old[0].base_offset} is gone"
                ) from None
            if tuple(segments[first : first + len(old)]) != tuple(old) or (
                first + len(old) >= len(segments)  # the active segment is never replaced
            ):
                raise SegmentsChangedError(f"{self.directory}: segments changed meanwhile")
            for o, n in zip(old, new, strict=True):
                renamed.extend(o.mark_deleted(link_log=True))
                n.install()
            self._view = _view((*segments[:first], *new, *segments[first + len(old) :]))
            for o in old:
                o.abandon()
        self._deleter.schedule(renamed, self.file_delete_delay_ms)
        self.fsync_directory()

    # -- durability and lifecycle -----------------------------------------------------

    def fsync_directory(self) -> None:
        """Make file creations, renames and removals in the directory durable."""
        if self._deleted:
            return
        try:
            fsync_dir(self.directory)
        except FileNotFoundError:
            if not self._deleted and not self._view.segments[-1].lazy:
                raise

    def _check_open(self) -> None:
        if self._closed:
            raise LogError(f"{self.directory}: log is closed")

    def close(self, *, sync: bool = True) -> None:
        """Trim indexes and drop the log's references (readers keep theirs)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            segments = self._view.segments
        for seg in segments:
            seg.close(sync=sync and seg.active)

    def delete_directory(self) -> Path:
        """Rename the directory ``<name>.<uuid>-delete`` and remove it after the delay.

        A new partition with the same name can be created at once: readers still
        holding a segment of this one read it through their descriptors, and nothing
        here ever opens a file by its old name again. Returns the new path.
        """
        with self._lock:
            self._closed = True
            self._deleted = True
            segments = self._view.segments
            doomed = self.directory.with_name(
                delete_dir_name(self.directory.name, uuid.uuid4().hex))
            try:
                os.rename(self.directory, doomed)
                made = True
            except FileNotFoundError:  # never written: no directory was ever made
                made = False
        for seg in segments:
            seg.abandon()
        if made:
            self._deleter.schedule([doomed], self.file_delete_delay_ms)
        return doomed
