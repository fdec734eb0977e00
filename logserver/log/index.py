"""Sparse, memory-mapped indexes of one segment: Kafka's ``.index`` and ``.timeindex``.

Both files are arrays of fixed-size big-endian entries, sorted, one entry per
``log.index.interval.bytes`` of log. While a segment is active its index files are
preallocated to ``log.index.size.max.bytes`` (so appends are plain stores into the
mapping, no syscalls) and trimmed to their entries when the segment rolls or closes.
The entry count lives only in memory; on open it is the file length divided by the entry
size, which is why an untrimmed index (a crash) shows up as trailing zero entries and
fails ``sanity_check``.

Descriptors: an index is mapped only when it is first read (a lookup, a sanity check),
and an inactive one can be unmapped again (:meth:`_Index.release`) by its idle segment;
an active one keeps one descriptor for its appends (``pwrite``) and maps itself for
reads on demand. So an idle partition holds its active segment's three files and
nothing for its older segments.

Offsets in entries are relative to the segment's base offset (u32); both indexes here
record the *base* offset of a batch (not Kafka's last offset), so a lookup lands on the
batch that contains the target directly.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import struct
import threading
from collections.abc import Callable
from pathlib import Path

from logserver.log.errors import IndexFullError

logger = logging.getLogger(__name__)

__all__ = ["OffsetIndex", "TimeIndex", "index_file_name"]

_U32_MAX = 2**32 - 1


def index_file_name(base_offset: int, suffix: str) -> str:
    """Kafka's file naming: 20-digit zero-padded base offset plus suffix."""
    return f"{base_offset:020d}{suffix}"


class _Index:
    """Shared mechanics: file, mapping, entry count, binary search, resize and trim."""

    _entry: struct.Struct
    suffix: str

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_bytes: int,
        *,
        writable: bool,
        new: bool = False,
        on_open: Callable[[], None] | None = None,
    ) -> None:
        """``new``: the file is known not to exist yet (a lazily created segment), so
        nothing is looked up; ``make_writable`` creates it. ``on_open`` is called after
        a descriptor or mapping was opened (the segment's file-handle cache entry)."""
        self.path = path
        self.base_offset = base_offset
        size = self._entry.size
        self._max_bytes = max(max_bytes // size, 1) * size
        self.on_open = on_open
        self.existed = False if new else path.exists()
        self._fd = -1  # open only while writable: the mapping holds its own (dup'ed) fd
        self._closed = False
        self._map_lock = threading.Lock()  # two readers mapping a dormant index at once
        if writable and not new:
            file_size = os.fstat(self._open_fd()).st_size
        else:
            file_size = path.stat().st_size if self.existed else 0
        self.file_size_at_open = file_size
        self.entries = file_size // size
        self._last: tuple[int, int] | None = None  # the last entry, while known
        self._mmap: mmap.mmap | None = None  # mapped on first read (see _mapped)
        self._capacity = self.entries  # entries the file can hold
        self.writable = False
        if writable:
            self.make_writable()

    def _opened(self) -> None:
        callback = self.on_open
        if callback is not None:
            callback()

    # -- mapping -----------------------------------------------------------------

    def _open_fd(self) -> int:
        fd = self._fd
        if fd < 0:
            fd = self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            self._opened()
        return fd

    def _release_fd(self) -> None:
        """Inactive indexes keep only the mapping: one descriptor each instead of two."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _resize(self, length: int) -> None:
        """Give the file ``length`` bytes; the next read maps it anew."""
        self._unmap()
        os.ftruncate(self._open_fd(), length)
        self._capacity = length // self._entry.size

    def _unmap(self) -> None:
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None

    def _mapped(self) -> mmap.mmap:
        """The mapping of the whole file, made on first use."""
        mapping = self._mmap
        if mapping is not None:
            return mapping
        with self._map_lock:
            mapping = self._mmap
            if mapping is None:
                length = self._capacity * self._entry.size
                own = self._fd < 0
                fd = os.open(self.path, os.O_RDWR) if own else self._fd
                try:
                    mapping = self._mmap = mmap.mmap(fd, length)
                finally:
                    if own:
                        os.close(fd)
            else:
                return mapping
        self._opened()
        return mapping

    def release(self) -> int:
        """Unmap an inactive index (it maps itself again when read); returns the
        descriptors given back."""
        if self.writable or self._mmap is None:
            return 0
        self._unmap()
        return 1

    def evict(self) -> int:
        """Unmap and close the write descriptor, active or not (the file-handle cache;
        the owner made sure nobody uses the index meanwhile); returns the descriptors
        given back. A writable index reopens its descriptor on its next append."""
        closed = self.descriptors
        self._unmap()
        self._release_fd()
        return closed

    @property
    def descriptors(self) -> int:
        """Descriptors held now: the write descriptor and the mapping's own."""
        return (self._fd >= 0) + (self._mmap is not None)

    def make_writable(self) -> None:
        """Preallocate to the max size so appends need no syscalls (active segment)."""
        self._resize(max(self._max_bytes, self.entries * self._entry.size))
        self.writable = True

    def trim(self) -> None:
        """Shrink the file to its entries: done on roll and close so a reopen sees the count."""
        self._resize(self.entries * self._entry.size)
        self.writable = False
        self._release_fd()

    @property
    def is_full(self) -> bool:
        return self.entries >= self._capacity

    @property
    def max_entries(self) -> int:
        return self._max_bytes // self._entry.size

    def _get(self, i: int) -> tuple[int, int]:
        return self._entry.unpack_from(self._mapped(), i * self._entry.size)

    def _last_raw(self) -> tuple[int, int] | None:
        """The last entry as stored (kept in memory by appends), or None if empty."""
        if not self.entries:
            return None
        if self._last is None:
            self._last = self._get(self.entries - 1)
        return self._last

    def _largest_le(self, column: int, target: int) -> int:
        """Index of the last entry whose ``column`` is <= target, or -1 (binary search)."""
        lo, hi = 0, self.entries - 1
        if hi < 0 or self._get(0)[column] > target:
            return -1
        unpack_from = self._entry.unpack_from
        buf = self._mapped()
        size = self._entry.size
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if unpack_from(buf, mid * size)[column] <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _put(self, first: int, second: int) -> None:
        if self.entries >= self._capacity:
            raise IndexFullError(f"{self.path.name} is full ({self.entries} entries)")
        if self.writable or self._fd >= 0:
            # Through the page cache, not the mapping: a store to a page not yet dirty
            # takes a write fault (ext4 page_mkwrite) costing ~2 ms here, which made a
            # 1,000-partition produce 80% page faults. Reads stay on the (coherent) map.
            os.pwrite(self._open_fd(), self._entry.pack(first, second),
                      self.entries * self._entry.size)
        else:
            self._entry.pack_into(self._mapped(), self.entries * self._entry.size, first, second)
        self.entries += 1
        self._last = (first, second)

    def reset(self) -> None:
        """Forget every entry (before a rebuild)."""
        self.entries = 0
        self._last = None

    def _relative(self, offset: int) -> int:
        rel = offset - self.base_offset
        if not 0 <= rel <= _U32_MAX:
            raise ValueError(f"offset {offset} out of range for segment {self.base_offset}")
        return rel

    def close(self) -> None:
        """Trim (if preallocated) and release the mapping and the descriptor."""
        if self._closed:
            return
        if self.writable:
            self.trim()
        self._unmap()
        self._release_fd()
        self._closed = True

    def rename(self, path: Path) -> None:
        """Move the file (a mapping or descriptor stays valid across the rename)."""
        os.rename(self.path, path)
        self.path = path

    def delete(self) -> None:
        self.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


class OffsetIndex(_Index):
    """Relative offset (u32) -> file position (u32) of a batch, sparse and sorted."""

    _entry = struct.Struct(">II")
    suffix = ".index"

    def append(self, offset: int, position: int) -> None:
        """Record that the batch starting at ``offset`` is at ``position``; keys strictly rise."""
        rel = self._relative(offset)
        last = self._last_raw()
        if last is not None:
            last_rel, last_pos = last
            if rel <= last_rel or position <= last_pos:
                raise ValueError(
                    f"{self.path.name}: entry ({offset}, {position}) does not follow "
                    f"({self.base_offset + last_rel}, {last_pos})"
                )
        self._put(rel, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the greatest entry <= offset, else (base_offset, 0)."""
        i = self._largest_le(0, offset - self.base_offset)
        if i < 0:
            return self.base_offset, 0
        rel, pos = self._get(i)
        return self.base_offset + rel, pos

    def lookup_position(self, position: int) -> tuple[int, int]:
        """(offset, position) of the greatest entry whose position is <= position."""
        i = self._largest_le(1, position)
        if i < 0:
            return self.base_offset, 0
        rel, pos = self._get(i)
        return self.base_offset + rel, pos

    def entry(self, i: int) -> tuple[int, int]:
        rel, pos = self._get(i)
        return self.base_offset + rel, pos

    def last_entry(self) -> tuple[int, int]:
        if not self.entries:
            return self.base_offset, 0
        return self.entry(self.entries - 1)

    def truncate_to(self, offset: int) -> None:
        """Drop entries for batches at or after ``offset``."""
        self._last = None
        self.entries = (
            self._largest_le(0, offset - self.base_offset - 1) + 1
            if offset > self.base_offset
            else 0
        )

    def sanity_check(self, log_size: int) -> str | None:
        """Cheap structural check (Kafka's plus a monotonicity test of the last two entries).

        Returns what is wrong, or None. Whether entries point at batch starts is checked
        by the segment, which can read the log.
        """
        if self.file_size_at_open % self._entry.size:
            return f"length {self.file_size_at_open} is not a multiple of {self._entry.size}"
        if not self.entries:
            return None
        last_rel, last_pos = self._get(self.entries - 1)
        if last_pos >= log_size:
            return f"last entry points at position {last_pos} beyond the log's {log_size} bytes"
        if self.entries > 1:
            prev_rel, prev_pos = self._get(self.entries - 2)
            if last_rel <= prev_rel or last_pos <= prev_pos:
                return "entries are not increasing (not trimmed after a crash, or garbage)"
        return None


class TimeIndex(_Index):
    """Timestamp (i64) -> relative offset (u32) of the batch where the segment's running
    max timestamp first reached that value; sparse, both columns rising."""

    _entry = struct.Struct(">qI")
    suffix = ".timeindex"

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, else (-1, base_offset)."""
        if not self.entries:
            return -1, self.base_offset
        ts, rel = self._get(self.entries - 1)
        return ts, self.base_offset + rel

    def maybe_append(self, timestamp: int, offset: int, *, final: bool = False) -> None:
        """Append if ``timestamp`` is above the last entry's (entries stay strictly rising).

        ``final`` (segment roll/close) may replace the last entry when the index is full,
        so the segment's true max timestamp is always recorded.
        """
        if timestamp < 0:
            return
        rel = self._relative(offset)
        last = self._last_raw()
        if last is not None:
            last_ts, last_rel = last
            if timestamp <= last_ts:
                return
            if rel < last_rel:
                raise ValueError(
                    f"{self.path.name}: offset {offset} below last entry's "
                    f"{self.base_offset + last_rel}"
                )
            if final and self.entries >= self._capacity:
                self.entries -= 1
                self._last = None
        elif final and not self._capacity:
            return  # trimmed empty index of an inactive segment: nothing to record into
        self._put(timestamp, rel)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the greatest entry with timestamp <= target, else (-1, base)."""
        i = self._largest_le(0, timestamp)
        if i < 0:
            return -1, self.base_offset
        ts, rel = self._get(i)
        return ts, self.base_offset + rel

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset is at or after ``offset``."""
        self._last = None
        self.entries = (
            self._largest_le(1, offset - self.base_offset - 1) + 1
            if offset > self.base_offset
            else 0
        )

    def sanity_check(self, next_offset: int) -> str | None:
        """Returns what is wrong, or None."""
        if self.file_size_at_open % self._entry.size:
            return f"length {self.file_size_at_open} is not a multiple of {self._entry.size}"
        if not self.entries:
            return None
        last_ts, last_rel = self._get(self.entries - 1)
        if self.base_offset + last_rel >= max(next_offset, self.base_offset + 1):
            return f"last entry's offset {self.base_offset + last_rel} is not below {next_offset}"
        first_ts, _ = self._get(0)
        if first_ts < 0 or last_ts < first_ts:
            return "timestamps are negative or decreasing"
        if self.entries > 1:
            prev_ts, prev_rel = self._get(self.entries - 2)
            if last_ts <= prev_ts or last_rel < prev_rel:
                return "entries are not increasing (not trimmed after a crash, or garbage)"
        return None
