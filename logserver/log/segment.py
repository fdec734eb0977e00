"""One log segment: a ``.log`` file of record batches exactly as received, plus its indexes.

The log file is never memory-mapped: appends are one ``os.pwrite`` per batch on a
descriptor kept open for the segment's life, reads are ``os.pread`` of batch headers
(never seek+read, so a concurrent fsync thread or sendfile cannot disturb a file
offset), and fetches get a ``SegmentSlice`` (logserver.log.slice) for ``os.sendfile``.
Only batch headers are ever decoded; records are opaque bytes.

Lifetime: a segment is reference counted. Its log holds one reference while the
segment is in the log's list; every reader (a fetch slice, the cleaner, a flush) pins
it for as long as it touches the descriptor or the indexes. Removing a segment renames
its files (``*.deleted``) and drops the log's reference; the descriptor and the index
mappings are closed by whoever drops the last one, so a descriptor number is never
closed (and reused by another file) while anyone still reads through it.

Descriptors of inactive segments are taken only while used: the ``.log`` file opens on
first access (:attr:`Segment.fd`), the indexes map on first lookup, and
:meth:`Segment.close_files_if_idle` (called by the log for segments nobody pinned since
its previous call, and at load) gives them back. A segment is only put to sleep while
its owner's is the only reference, under the same lock a reader's pin takes, so no
reader ever sees its descriptor closed.

Descriptors are bounded by the process's file-handle cache
(logserver.log.file_cache, ``log.file.handles.max``): every opening registers the
segment there, and beyond the bound the least recently used segments close their files
(:meth:`Segment.evict_files`), the active ones included; their next append or read opens
them again. The owner's own work on a segment (append, roll, truncation, recovery)
holds a pin like any reader, so an eviction from another thread never closes a
descriptor under it. A brand-new partition's first segment is *lazy*: no file exists
until its first append (or anything else that needs the descriptor), so an empty
partition holds no descriptor and costs no file creations.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from kafkaproto.batch import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    Buffer,
    CorruptBatchError,
    parse_header,
    peek_offset_and_size,
    verify_crc,
)
from logserver.log.config import LogConfig
from logserver.log.errors import CorruptLogError
from logserver.log.file_cache import FILE_HANDLES
from logserver.log.fsutil import child_path, fsync_dir, fsync_path
from logserver.log.index import OffsetIndex, TimeIndex, index_file_name
from logserver.log.transaction_index import TXN_INDEX_SUFFIX, AbortedTxnEntry, TransactionIndex

logger = logging.getLogger(__name__)

__all__ = ["CLEANED_SUFFIX", "DELETED_SUFFIX", "LOG_SUFFIX", "Segment", "find_valid_batch"]

LOG_SUFFIX = ".log"
DELETED_SUFFIX = ".deleted"  # removed files waiting for file.delete.delay.ms
CLEANED_SUFFIX = ".cleaned"  # a compacted copy being written
_INT32_MAX = 2**31 - 1
_SCAN_CHUNK = 1 << 20
_SCAN_OVERLAP = BATCH_HEADER_SIZE
MAGIC_POSITION = 16
# base offset, length, ... last offset delta: the 27 header bytes that locate an offset.
_PEEK = struct.Struct(">qi11xi")
_PEEK_SIZE = _PEEK.size  # 27
# The segment writer, a module-level name: the test launcher (tests/helpers/faults) replaces it.
pwrite = os.pwrite


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


_P = ParamSpec("_P")
_T = TypeVar("_T")


def _held(method: Callable[Concatenate[Segment, _P], _T]) -> Callable[Concatenate[Segment, _P], _T]:
    """Run an owner's method holding a pin, so the file-handle cache cannot close the
    segment's files under it (from another thread)."""

    @functools.wraps(method)
    def wrapper(self: Segment, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        pinned = self.pin()
        try:
            return method(self, *args, **kwargs)
        finally:
            if pinned:
                self.unpin()

    return wrapper


def find_valid_batch(fd: int, start: int, end: int) -> tuple[int, int] | None:
    """(position, base offset) of the first CRC-valid batch starting in [start, end), or None.

    Tells a torn tail (nothing valid after the damage: safe to cut) from damage in the
    middle of data (cutting would lose good batches). Candidates are found by the magic
    byte at +16 and a plausible length, so random bytes rarely cost a CRC.
    """
    chunk = _SCAN_CHUNK
    pos = start
    while pos < end:
        buf = os.pread(fd, min(chunk + _SCAN_OVERLAP, end - pos), pos)
        limit = min(chunk, len(buf))
        i = buf.find(b"\x02", MAGIC_POSITION)
        while i != -1 and i - MAGIC_POSITION < limit:
            cand = pos + i - MAGIC_POSITION
            if _is_valid_batch_at(fd, buf, i - MAGIC_POSITION, cand, end):
                return cand, peek_offset_and_size(buf, i - MAGIC_POSITION)[0]
            i = buf.find(b"\x02", i + 1)
        pos += limit
        if limit < chunk:
            break
    return None


def _is_valid_batch_at(fd: int, buf: bytes, off: int, pos: int, end: int) -> bool:
    if off + BATCH_HEADER_SIZE > len(buf):
        head = os.pread(fd, BATCH_HEADER_SIZE, pos)
        if len(head) < BATCH_HEADER_SIZE:
            return False
        buf, off = head, 0
    try:
        header = parse_header(buf, off)
    except CorruptBatchError:
        return False
    if pos + header.size > end or header.last_offset_delta < 0 or header.base_offset < 0:
        return False
    data = buf[off : off + header.size] if off + header.size <= len(buf) else os.pread(
        fd, header.size, pos
    )
    return len(data) == header.size and verify_crc(data, 0, header)


class Segment:
    """A ``.log`` file starting at ``base_offset`` with its offset and time indexes.

    Open with ``Segment(...)`` and then call exactly one of ``load()`` (trusted data:
    cheap index sanity check, rebuild only if it fails) or ``recover()`` (untrusted:
    re-validate every batch and rebuild the indexes). A brand-new segment needs neither.
    """

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        *,
        active: bool,
        created_ms: int | None = None,
        file_suffix: str = "",
        lazy: bool = False,
    ) -> None:
        """Open (creating if missing) ``<base><.log|.index|.timeindex><file_suffix>``.

        ``file_suffix`` is for a segment being built beside the live one (the cleaner's
        ``.cleaned`` copy); ``install()`` gives it the real names. ``lazy`` (a new,
        active segment whose files do not exist) creates nothing until the descriptor is
        first needed: only for a partition's first segment at an offset a missing
        segment means anyway (0), so a crash before the first append loses nothing.
        """
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        self.file_suffix = file_suffix
        stem = index_file_name(base_offset, "")  # paths built once, cheaply (child_path)
        self.path = child_path(directory, stem + LOG_SUFFIX + file_suffix)
        self._lazy = lazy and active
        self._fd = -1 if self._lazy else os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self._refs = 1  # the owner's (the log's, or the cleaner's for a copy)
        self._ref_lock = threading.Lock()
        self._in_open = False  # inside _reopen: registration waits for the lock's release
        # Called before a lazy segment creates its files (its Log makes the directory).
        self.before_create: Callable[[], None] | None = None
        self._owned = True
        self._freed = False
        self._used = True  # read since the last close_files_if_idle
        offset_index: OffsetIndex | None = None
        try:
            self.size = 0 if self._lazy else os.fstat(self._fd).st_size
            offset_index = OffsetIndex(
                child_path(directory, stem + OffsetIndex.suffix + file_suffix),
                base_offset,
                config.index_max_bytes,
                writable=active and not self._lazy,
                new=self._lazy,
                on_open=self._files_opened,
            )
            self.time_index = TimeIndex(
                child_path(directory, stem + TimeIndex.suffix + file_suffix),
                base_offset,
                config.index_max_bytes,
                writable=active and not self._lazy,
                new=self._lazy,
                on_open=self._files_opened,
            )
            self.offset_index = offset_index
            # New segments get an empty file at once (a missing one means "rebuild").
            self.txn_index = TransactionIndex(
                child_path(directory, stem + TXN_INDEX_SUFFIX + file_suffix),
                create=active and not self._lazy,
            )
        except BaseException:
            if offset_index is not None:
                offset_index.close()
            if self._fd >= 0:
                os.close(self._fd)
            raise
        if not self._lazy:
            FILE_HANDLES.opened(self)
        self.active = active
        self.next_offset = base_offset
        self.max_timestamp = -1  # largest batch max_timestamp in the segment
        self.offset_of_max_timestamp = base_offset  # base offset of the batch that set it
        self.created_ms = _now_ms() if created_ms is None else created_ms
        self.index_problem: str | None = None  # why load() rebuilt the indexes
        # The .txnindex was reset at load and its entries are rebuilt by the Log's replay.
        self.txn_index_stale = False
        self.last_truncation: str | None = None  # what recover() cut, for the report
        self._first_batch_timestamp: int | None = None  # rolling time base, as in Kafka
        self._bytes_since_index_entry = 0

    def __repr__(self) -> str:
        return (
            f"Segment({self.path.name}, offsets [{self.base_offset}, {self.next_offset}), "
            f"{self.size} bytes)"
        )

    # -- opening -----------------------------------------------------------------

    @_held
    def load(self, *, allow_data_loss: bool = True, data_follows: bool = False) -> bool:
        """Adopt trusted data: sanity check the indexes and derive the in-memory state.

        A missing, garbage or untrimmed index is rebuilt from the log (logged at
        WARNING; the reason is kept in ``index_problem``). Returns True if the indexes
        were rebuilt. The keyword arguments are those of ``recover``.
        """
        self.last_truncation = None
        problem = self.index_problem = self._index_problem()
        if problem is None:
            self._load_state_from_indexes()
            return False
        logger.warning("%s: rebuilding indexes: %s", self.path, problem)
        # Header checks still apply: a torn tail is truncated even in trusted data.
        self.recover(verify_from=None, allow_data_loss=allow_data_loss, data_follows=data_follows)
        return True

    def _index_problem(self) -> str | None:
        oi, ti = self.offset_index, self.time_index
        if self.size and not oi.existed:
            return f"{oi.path.name} is missing"
        if self.size and not ti.existed:
            return f"{ti.path.name} is missing"
        problem = oi.sanity_check(self.size)
        if problem:
            return f"{oi.path.name}: {problem}"
        # The first and last entries must point at batch starts holding those offsets.
        for i in {0, oi.entries - 1} if oi.entries else ():
            offset, pos = oi.entry(i)
            head = os.pread(self.fd, LOG_OVERHEAD, pos)
            if len(head) < LOG_OVERHEAD or peek_offset_and_size(head)[0] != offset:
                return f"{oi.path.name}: entry ({offset}, {pos}) is not a batch start"
        next_offset = self._next_offset_after(*oi.last_entry())
        if next_offset is None:
            return f"{self.path.name}: batch headers after the last index entry are torn"
        problem = ti.sanity_check(next_offset)
        if problem:
            return f"{ti.path.name}: {problem}"
        return None

    def _next_offset_after(self, offset: int, position: int) -> int | None:
        """Walk headers from a known batch start to the end; None if the tail is torn."""
        next_offset = offset
        while position < self.size:
            head = os.pread(self.fd, _PEEK_SIZE, position)
            if len(head) < _PEEK_SIZE:
                return None
            base, length, last_delta = _PEEK.unpack(head)
            if (
                length < BATCH_HEADER_SIZE - LOG_OVERHEAD
                or position + length + LOG_OVERHEAD > self.size
            ):
                return None
            next_offset = base + last_delta + 1
            position += length + LOG_OVERHEAD
        return next_offset

    def _load_state_from_indexes(self) -> None:
        last_offset, last_pos = self.offset_index.last_entry()
        next_offset = self._next_offset_after(last_offset, last_pos)
        assert next_offset is not None  # checked by _index_problem
        self.next_offset = next_offset if self.size else self.base_offset
        # A cleanly closed or rolled segment's last time entry is its max (written on close).
        ts, offset = self.time_index.last_entry()
        self.max_timestamp, self.offset_of_max_timestamp = ts, offset
        self._bytes_since_index_entry = self.size - last_pos

    @_held
    def make_active(self) -> None:
        """Preallocate the indexes so this segment can take appends."""
        if not self.active:
            self.offset_index.make_writable()
            self.time_index.make_writable()
            self.active = True

    @_held
    def make_inactive(self) -> None:
        """On roll: record the final max timestamp and trim the indexes, like Kafka."""
        if self._lazy:  # never written (rolls need data): nothing to trim or create
            return
        if self.active:
            if self.max_timestamp >= 0:
                self.time_index.maybe_append(
                    self.max_timestamp, self.offset_of_max_timestamp, final=True
                )
            self.offset_index.trim()
            self.time_index.trim()
            self.active = False

    # -- recovery ------------------------------------------------------------------

    @_held
    def recover(
        self,
        verify_from: int | None = 0,
        expected_offset: int | None = None,
        *,
        allow_data_loss: bool = True,
        data_follows: bool = False,
    ) -> int:
        """Re-validate the file, truncate at the first bad batch, rebuild both indexes.

        Every batch gets header sanity checks (magic, length, offsets contiguous from
        ``expected_offset`` — default the segment's base offset — and fitting in a u32
        relative offset, whole batch present); batches starting at or after
        ``verify_from`` also get their CRC-32C checked (None: no CRC checks, for a
        trusted file whose index was lost). Returns the number of bytes truncated.

        Without ``allow_data_loss``, damage that is not a torn tail raises
        CorruptLogError before anything is truncated: a CRC-valid batch somewhere after
        the damage in this file, or ``data_follows`` (later segments hold data).
        ``last_truncation`` describes what was cut, for the start-up report.
        """
        self.last_truncation = None
        file_size = os.fstat(self.fd).st_size
        verify_pos = file_size if verify_from is None else verify_from
        expected = self.base_offset if expected_offset is None else expected_offset
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self._first_batch_timestamp = None
        self._bytes_since_index_entry = 0
        if not self.offset_index.writable:
            # Rebuilding needs room; trim back to the entries afterwards.
            self.offset_index.make_writable()
            self.time_index.make_writable()
            rewritable = True
        else:
            rewritable = False
        self.size = 0
        pos = 0
        buf: bytes = b""
        buf_pos = 0
        reason: str | None = None
        while pos < file_size:
            off = pos - buf_pos
            if off + BATCH_HEADER_SIZE > len(buf):
                buf = os.pread(self.fd, min(_SCAN_CHUNK, file_size - pos), pos)
                buf_pos, off = pos, 0
                if len(buf) < BATCH_HEADER_SIZE:
                    reason = f"torn batch header ({len(buf)} bytes) at position {pos}"
                    break
            try:
                header = parse_header(buf, off)
            except CorruptBatchError as exc:
                reason = f"corrupt batch header at position {pos}: {exc}"
                break
            size = header.size
            if pos + size > file_size:
                reason = (
                    f"torn batch at position {pos}: {size} bytes declared, "
                    f"{file_size - pos} present"
                )
                break
            if header.base_offset != expected:
                reason = (
                    f"batch at position {pos} has base offset {header.base_offset}, "
                    f"expected {expected}"
                )
                break
            if (
                header.last_offset_delta < 0
                or header.record_count < 0
                or header.last_offset - self.base_offset > _INT32_MAX
            ):
                reason = f"batch at position {pos} has bad offsets/count ({header})"
                break
            if pos >= verify_pos:
                if off + size > len(buf):
                    buf = os.pread(self.fd, max(_SCAN_CHUNK, size), pos)
                    buf_pos, off = pos, 0
                if not verify_crc(buf, off, header):
                    reason = f"CRC mismatch in batch at position {pos} (offset {expected})"
                    break
            self._index_batch(pos, header.base_offset, header.max_timestamp, size)
            self.size = pos = pos + size
            expected = header.next_offset
        self.next_offset = expected if self.size else self.base_offset
        truncated = file_size - self.size
        if truncated and not allow_data_loss:
            valid_after = find_valid_batch(self.fd, self.size + 1, file_size)
            if valid_after is not None or data_follows:
                where = (
                    f"a valid batch follows at position {valid_after[0]} "
                    f"(offset {valid_after[1]})"
                    if valid_after is not None
                    else "later segments hold data"
                )
                raise CorruptLogError(
                    f"{self.path}: {reason}; this is not a torn tail ({where}), so "
                    f"truncating here would drop {truncated} bytes of this segment"
                    f"{' and every later segment' if data_follows else ''}"
                )
        if truncated:
            self.last_truncation = (
                f"{self.path}: truncated {truncated} bytes at position {self.size} "
                f"(offsets >= {self.next_offset}): {reason}"
            )
            logger.warning(
                "%s: truncating %d bytes at position %d (offsets >= %d): %s",
                self.path,
                truncated,
                self.size,
                self.next_offset,
                reason,
            )
            os.ftruncate(self.fd, self.size)
        if rewritable:
            self.make_inactive_indexes()
        return truncated

    def make_inactive_indexes(self) -> None:
        """Trim rebuilt indexes of a segment that takes no appends."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(
                self.max_timestamp, self.offset_of_max_timestamp, final=True
            )
        self.offset_index.trim()
        self.time_index.trim()

    # -- append ----------------------------------------------------------------------

    @_held
    def should_roll(
        self, batch_size: int, max_timestamp: int, last_offset: int, now_ms: int
    ) -> bool:
        """Kafka's LogSegment.shouldRoll: size, age, full index, or relative offset overflow."""
        if not self.size:
            return False
        if self.size > self.config.segment_bytes - batch_size:
            return True
        if self.offset_index.is_full or self.time_index.is_full:
            return True
        if last_offset - self.base_offset > _INT32_MAX:
            return True
        first_ts = self._first_batch_timestamp
        if first_ts is None:
            head = os.pread(self.fd, BATCH_HEADER_SIZE, 0)
            first_ts = parse_header(head).max_timestamp if len(head) == BATCH_HEADER_SIZE else -1
            self._first_batch_timestamp = first_ts
        # Age: by record timestamps when they exist, else by wall clock since creation.
        waited = max_timestamp - first_ts if first_ts >= 0 else now_ms - self.created_ms
        return waited > self.config.roll_ms

    @_held
    def append(self, batch: Buffer, base_offset: int, max_timestamp: int, next_offset: int) -> int:
        """Write one whole batch at the end of the file; returns its position."""
        pos = self.size
        try:
            n = pwrite(self.fd, batch, pos)
            if n != len(batch):  # short writes only happen on a full disk; finish or raise
                view = memoryview(batch)
                while n < len(view):
                    n += pwrite(self.fd, view[n:], pos + n)
        except OSError:
            # Disk full or I/O error: cut a partial batch off again, so the file still
            # ends at a batch boundary and the next append (space back) goes right here.
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, pos)
            raise
        self._index_batch(pos, base_offset, max_timestamp, n)
        self.size = pos + n
        self.next_offset = next_offset
        return pos

    def _index_batch(self, pos: int, base_offset: int, max_timestamp: int, size: int) -> None:
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = base_offset
        if self._first_batch_timestamp is None:
            self._first_batch_timestamp = max_timestamp
        if self._bytes_since_index_entry > self.config.index_interval_bytes:
            # Appends roll before an index fills; only a rebuild with a smaller
            # log.index.size.max.bytes gets here full, and then the tail stays unindexed.
            if not self.offset_index.is_full:
                self.offset_index.append(base_offset, pos)
            if not self.time_index.is_full:
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += size

    # -- read ------------------------------------------------------------------------

    def translate_offset(self, offset: int) -> tuple[int, int, int] | None:
        """(position, base_offset, size) of the batch holding ``offset``, or None if past the end.

        One index lookup, then 27-byte preads from batch to batch (at most about
        ``log.index.interval.bytes`` of log).
        """
        if offset >= self.next_offset:
            return None
        _, pos = self.offset_index.lookup(offset)
        end = self.size
        pread, fd, unpack = os.pread, self.fd, _PEEK.unpack
        while pos < end:
            base, length, last_delta = unpack(pread(fd, _PEEK_SIZE, pos))
            if base + last_delta >= offset:
                return pos, base, length + LOG_OVERHEAD
            pos += length + LOG_OVERHEAD
        return None

    def read_region(
        self,
        start_offset: int,
        max_bytes: int,
        max_position: int | None = None,
        *,
        min_one: bool = True,
    ) -> tuple[int, int] | None:
        """``(position, length)`` of whole batches from the one holding ``start_offset``.

        With ``min_one`` the first batch is included whole even when larger than
        ``max_bytes`` (KIP-74; without it such a read returns None, as Kafka answers
        later partitions of a full response); later batches only while the total stays
        within ``max_bytes``. Nothing at or beyond ``max_position`` (the high
        watermark's position) is included.
        """
        limit_pos = self.size if max_position is None else min(max_position, self.size)
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        pos, _, first_size = found
        if pos + first_size > limit_pos or (not min_one and first_size > max_bytes):
            return None
        end_limit = min(pos + max(max_bytes, 0), limit_pos)
        end = pos + first_size
        if end < end_limit:
            # Jump via the index to the last indexed batch start that still fits.
            _, indexed = self.offset_index.lookup_position(end_limit)
            if indexed > end:
                end = indexed
            pread, fd = os.pread, self.fd
            while end + LOG_OVERHEAD <= end_limit:
                size = peek_offset_and_size(pread(fd, LOG_OVERHEAD, end))[1]
                if end + size > end_limit:
                    break
                end += size
        return pos, end - pos

    def last_modified_ms(self) -> int:
        """The log file's modification time (retention of data without timestamps)."""
        if self._lazy:  # no file yet
            return self.created_ms
        # By name, not descriptor: the file-handle cache may close it meanwhile.
        return int(os.stat(self.path).st_mtime * 1000)

    def read_at(self, position: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``position`` (the caller holds a pin or the owner's ref)."""
        return os.pread(self.fd, size, position)

    def iter_headers(self, position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of every batch from ``position`` (a batch start) to the end.

        Reads the file in 1 MiB chunks while batches are small, and only headers once
        they are big. The data must be trusted (already validated).
        """
        end = self.size
        buf: bytes = b""
        buf_pos = position
        chunk = _SCAN_CHUNK
        while position + BATCH_HEADER_SIZE <= end:
            off = position - buf_pos
            if off + BATCH_HEADER_SIZE > len(buf):
                buf = os.pread(self.fd, min(chunk, end - position), position)
                buf_pos, off = position, 0
            header = parse_header(buf, off)
            yield position, header
            position += header.size
            chunk = _SCAN_CHUNK if header.size < _SCAN_CHUNK // 4 else BATCH_HEADER_SIZE

    def find_offset_by_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """(position, header) data of the first batch whose max_timestamp >= ``timestamp``.

        Returns ``(position, base_offset, max_timestamp)`` or None. Batch granularity:
        the caller decides whether to decode the batch for the exact record.
        """
        if self.max_timestamp < timestamp:
            return None
        _, ts_offset = self.time_index.lookup(timestamp)
        _, pos = self.offset_index.lookup(ts_offset)
        for position, header in self.iter_headers(pos):
            if header.max_timestamp >= timestamp:
                return position, header.base_offset, header.max_timestamp
        return None

    # -- truncation, durability, lifecycle --------------------------------------------

    @_held
    def truncate_to(self, offset: int) -> int:
        """Drop the batch holding ``offset`` and everything after; returns bytes removed.

        Kafka semantics: truncation is at batch granularity, so the segment's next
        offset becomes that batch's base offset (<= ``offset``).
        """
        found = self.translate_offset(offset)
        if found is None:
            return 0
        pos = found[0]
        removed = self.size - pos
        os.ftruncate(self.fd, pos)
        self.size = pos
        # Rare operation: recompute indexes and max timestamp by scanning the headers.
        self.recover(verify_from=None)
        self.txn_index.truncate_to(self.next_offset)
        return removed

    def check_txn_index(self, *, trusted: bool) -> bool:
        """At load: keep a sane ``.txnindex`` of trusted data, else empty it for the
        rebuild (``txn_index_stale``). Returns True when it must be rebuilt."""
        problem = None if not trusted else self.txn_index.sanity_problem(
            self.base_offset, self.next_offset)
        if trusted and problem is None:
            return False
        if problem is not None:
            logger.warning("%s: rebuilding the transaction index: %s", self.path, problem)
        self.txn_index.reset()
        self.txn_index_stale = True
        return True

    @_held
    def add_aborted_txn(self, entry: AbortedTxnEntry) -> None:
        """Record an abort marker this segment holds (written after the marker itself)."""
        self.txn_index.append(entry)

    def fsync(self) -> None:
        """Make this segment durable: its log data and, once rolled, its trimmed indexes.

        The active segment's indexes are left out: they are rebuilt after an unclean
        stop anyway (everything from the recovery point on is), so fsyncing them on every
        flush would only triple the cost. Inactive indexes keep no descriptor of their
        own and are fsynced by path (a segment renamed away meanwhile needs none).
        The caller holds a pin.
        """
        if self._lazy:
            return
        os.fsync(self.fd)
        if not self.active:
            fsync_path(self.offset_index.path, missing_ok=True)
            fsync_path(self.time_index.path, missing_ok=True)
            self.txn_index.fsync()

    # -- references -------------------------------------------------------------------

    def pin(self) -> bool:
        """Take a reference for reading; False if the segment is already closed."""
        with self._ref_lock:
            if self._refs <= 0:
                return False
            self._refs += 1
            return True

    def unpin(self) -> None:
        """Drop a reference; the last one closes the descriptor and the index mappings."""
        with self._ref_lock:
            self._refs -= 1
            last = self._refs == 0
        if last:
            self._free()

    @property
    def readers(self) -> int:
        """Pins held besides the owner's reference (for tests and logs)."""
        with self._ref_lock:
            return self._refs - (1 if self._owned else 0)

    @property
    def is_open(self) -> bool:
        """Not freed yet (its files may still be closed while idle)."""
        return not self._freed

    @property
    def fd(self) -> int:
        """The ``.log`` descriptor, opened again if the segment slept; -1 once freed."""
        fd = self._fd
        if fd < 0:
            fd = self._reopen()
        self._used = True
        return fd

    def _reopen(self) -> int:
        with self._ref_lock:
            opened = False
            if self._fd < 0 and not self._freed:
                self._in_open = True
                try:
                    if self._lazy:
                        self._create_files()
                    else:
                        self._fd = os.open(self.path, os.O_RDWR)
                finally:
                    self._in_open = False
                opened = True
            fd = self._fd
        if opened:
            FILE_HANDLES.opened(self)
        return fd

    def _create_files(self) -> None:
        """A lazy segment's first use: create the log, then the preallocated indexes
        (a crash in between leaves an empty log without indexes: nothing to rebuild)."""
        if self.before_create is not None:
            self.before_create()
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if self.active:
            self.offset_index.make_writable()
            self.time_index.make_writable()
        self.txn_index.reset()
        self._lazy = False
        # As durable as files made at creation were: their directory entries are synced
        # now, whatever the durability mode (once per partition, on its first append).
        fsync_dir(self.directory)
        logger.debug("%s: created on first use", self.path)

    @property
    def lazy(self) -> bool:
        """No file created yet (an empty partition's first segment)."""
        return self._lazy

    def _files_opened(self) -> None:
        """An index opened a descriptor or mapping: register with the file-handle cache."""
        self._used = True
        if not self._in_open:
            FILE_HANDLES.opened(self)

    def evict_files(self) -> int:
        """Close every file (active segment included) if only the owner holds the
        segment: for the file-handle cache. Returns the descriptors closed, or -1 when a
        reader (or the owner's own work) holds it now and it stays open."""
        with self._ref_lock:
            if self._freed or self._lazy:
                return 0
            if not self._owned or self._refs != 1:
                return -1
            closed = self.offset_index.evict() + self.time_index.evict()
            self.txn_index.release()
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
                closed += 1
            return closed

    @property
    def files_open(self) -> int:
        """Descriptors this segment holds now (its log file and index mappings/fds)."""
        count = 1 if self._fd >= 0 else 0
        for index in (self.offset_index, self.time_index):
            count += index.descriptors
        return count

    def close_files_if_idle(self, *, force: bool = False) -> int:
        """Close an inactive segment's files if nobody used it since the last call
        (``force``: whatever the use) and only its owner holds it; returns the
        descriptors closed. Its next reader opens them again."""
        with self._ref_lock:
            if self.active or self._freed or not self._owned or self._refs != 1:
                return 0
            if self._used and not force:
                self._used = False
                return 0
            closed = self.offset_index.release() + self.time_index.release()
            self.txn_index.release()
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
                closed += 1
            self._used = False
        FILE_HANDLES.forget(self)
        return closed

    def _release_owner(self) -> None:
        with self._ref_lock:
            if not self._owned:
                return
            self._owned = False
        self.unpin()

    def _free(self) -> None:
        if self._lazy:
            # Nothing was created: closing the indexes must not create (trim) them.
            self.offset_index.writable = self.time_index.writable = False
        self.offset_index.close()
        self.time_index.close()
        with self._ref_lock:
            fd, self._fd = self._fd, -1
            self._freed = True
        if fd >= 0:
            os.close(fd)
        FILE_HANDLES.forget(self)

    # -- file names -------------------------------------------------------------------

    def file_paths(self) -> list[Path]:
        """The log and index files under their current names."""
        return [self.path, self.offset_index.path, self.time_index.path, self.txn_index.path]

    def mark_deleted(self, *, link_log: bool = False) -> list[Path]:
        """Rename the files ``*.deleted`` (log first); returns the new paths.

        ``link_log`` hard-links the log file to its ``.deleted`` name instead of moving
        it, for a swap that then replaces the live name atomically (os.replace), so a
        crash in between never leaves the offsets without a ``.log`` file.
        """
        done: list[Path] = []
        log_target = self.path.with_name(self.path.name + DELETED_SUFFIX)
        with contextlib.suppress(FileNotFoundError):
            if link_log:
                with contextlib.suppress(FileExistsError):
                    os.unlink(log_target)
                os.link(self.path, log_target)
            else:
                os.rename(self.path, log_target)
            done.append(log_target)
        self.path = log_target
        for index in (self.offset_index, self.time_index):
            target = index.path.with_name(index.path.name + DELETED_SUFFIX)
            with contextlib.suppress(FileNotFoundError):
                index.rename(target)
                done.append(target)
            index.path = target
        txn_target = self.txn_index.path.with_name(self.txn_index.path.name + DELETED_SUFFIX)
        with contextlib.suppress(FileNotFoundError):
            self.txn_index.rename(txn_target)
            done.append(txn_target)
        return done

    def install(self) -> None:
        """Give a ``file_suffix`` copy its real names: the log by an atomic replace.

        The old segment's indexes must be gone first (``mark_deleted``), so a crash
        between the steps never pairs the new log with stale indexes (missing
        indexes are rebuilt at start-up).
        """
        if not self.file_suffix:
            return
        cut = len(self.file_suffix)
        final = self.path.with_name(self.path.name[:-cut])
        os.replace(self.path, final)
        self.path = final
        for index in (self.offset_index, self.time_index):
            index.rename(index.path.with_name(index.path.name[:-cut]))
        txn = self.txn_index
        txn.rename(txn.path.with_name(txn.path.name[:-cut]))
        self.file_suffix = ""

    # -- lifecycle --------------------------------------------------------------------

    def close(self, *, sync: bool = False) -> None:
        """Record the final max timestamp, trim the indexes, drop the owner's reference.

        ``sync`` fsyncs the trimmed indexes (clean shutdown of the active segment, so a
        reopen after a power loss still finds them trimmed). The descriptor closes once
        no reader holds the segment any more.
        """
        if not self._owned:
            return
        self.make_inactive()
        if sync and not self._lazy:
            fsync_path(self.offset_index.path)
            fsync_path(self.time_index.path)
            self.txn_index.fsync()
        self._release_owner()

    def retire(self) -> list[Path]:
        """Rename the files ``*.deleted`` and drop the owner's reference; returns the paths.

        Readers holding a pin keep reading the old bytes; the files are removed by the
        owner's deleter after ``file.delete.delay.ms``.
        """
        paths = self.mark_deleted()
        self._release_owner()
        return paths

    def abandon(self) -> None:
        """Drop the owner's reference without touching the files (the directory went)."""
        self._release_owner()

    def delete(self) -> None:
        """Remove the files now (never-served segments: recovery, a failed copy)."""
        for path in self.file_paths():
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        self._release_owner()
