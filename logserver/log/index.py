"""Sparse, memory-mapped indexes of one segment: Kafka's ``.index`` and ``.timeindex``.

Both files are arrays of fixed-size big-endian entries, sorted, one entry per
``log.index.interval.bytes`` of log. While a segment is active its index files are
preallocated to ``log.index.size.max.bytes`` (so appends are plain stores into the
mapping, no syscalls) and trimmed to their entries when the segment rolls or closes.
The entry count lives only in memory; on open it is the file length divided by the entry
size, which is why an untrimmed index (a crash) shows up as trailing zero entries and
fails ``sanity_check``.

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

    def __init__(self, path: Path, base_offset: int, max_bytes: int, *, writable: bool) -> None:
        self.path = path
        self.base_offset = base_offset
        size = self._entry.size
        self._max_bytes = max(max_bytes // size, 1) * size
        self.existed = path.exists()
        self._fd = -1  # open only while writable: the mapping holds its own (dup'ed) fd
        self._closed = False
        file_size = os.fstat(self._open_fd()).st_size
        self.file_size_at_open = file_size
        self.entries = file_size // size
        self._mmap: mmap.mmap | None = None
        self._capacity = 0  # entries the current mapping can hold
        self.writable = False
        if writable:
            self.make_writable()
        else:
            self._map(self.entries * size, resize=False)
            self._release_fd()

    # -- mapping -----------------------------------------------------------------

    def _open_fd(self) -> int:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    def _release_fd(self) -> None:
        """Inactive indexes keep only the mapping: one descriptor each instead of two."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _map(self, length: int, *, resize: bool) -> None:
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None
        fd = self._open_fd()
        if resize:
            os.ftruncate(fd, length)
        self._mmap = mmap.mmap(fd, length) if length else None
        self._capacity = length // self._entry.size

    def make_writable(self) -> None:
        """Preallocate to the max size so appends need no syscalls (active segment)."""
        length = max(self._max_bytes, self.entries * self._entry.size)
        self._map(length, resize=True)
        self.writable = True

    def trim(self) -> None:
        """Shrink the file to its entries: done on roll and close so a reopen sees the count."""
        self._map(self.entries * self._entry.size, resize=True)
        self.writable = False
        self._release_fd()

    @property
    def is_full(self) -> bool:
        return self.entries >= self._capacity

    @property
    def max_entries(self) -> int:
        return self._max_bytes // self._entry.size

    def _get(self, i: int) -> tuple[int, int]:
        assert self._mmap is not None
        return self._entry.unpack_from(self._mmap, i * self._entry.size)

    def _largest_le(self, column: int, target: int) -> int:
        """Index of the last entry whose ``column`` is <= target, or -1 (binary search)."""
        lo, hi = 0, self.entries - 1
        if hi < 0 or self._get(0)[column] > target:
            return -1
        unpack_from = self._entry.unpack_from
        buf = self._mmap
        assert buf is not None  # entries exist, so the file is mapped
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
        assert self._mmap is not None
        if self._fd >= 0:
            # Through the page cache, not the mapping: a store to a page not yet dirty
            # takes a write fault (ext4 page_mkwrite) costing ~2 ms here, which made a
            # 1,000-partition produce 80% page faults. Reads stay on the (coherent) map.
            os.pwrite(self._fd, self._entry.pack(first, second), self.entries * self._entry.size)
        else:
            self._entry.pack_into(self._mmap, self.entries * self._entry.size, first, second)
        self.entries += 1

    def reset(self) -> None:
        """Forget every entry (before a rebuild)."""
        self.entries = 0

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
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None
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
        if self.entries:
            last_rel, last_pos = self._get(self.entries - 1)
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
        if self.entries:
            last_ts, last_rel = self._get(self.entries - 1)
            if timestamp <= last_ts:
                return
            if rel < last_rel:
                raise ValueError(
                    f"{self.path.name}: offset {offset} below last entry's "
                    f"{self.base_offset + last_rel}"
                )
            if final and self.entries >= self._capacity:
                self.entries -= 1
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
