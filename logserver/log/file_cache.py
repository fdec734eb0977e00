"""A bounded cache of open segment files: descriptors bounded by a setting, not by partitions.

Kafka keeps every segment's files open, so its descriptors grow with the partition
count; Redpanda bounds them with a file-handle cache. Here each ``Segment`` registers
itself with the process-wide :data:`FILE_HANDLES` when it opens its ``.log`` descriptor
or maps an index, and whenever more segments hold files than
``log.file.handles.max`` allows (counted as ``FDS_PER_SEGMENT`` descriptors each, a
segment's worst case), the least recently used ones close theirs
(:meth:`Segment.evict_files`). A segment that is read or written again reopens its files
through the same path and registers again.

Recency is a second-chance clock, not an exact LRU, so the hot path pays nothing: a
segment's use only sets a flag (``Segment._used``); an eviction scan gives a used
segment one more round and clears the flag. A segment that somebody holds (a pin: a
fetch whose ``sendfile`` is in flight, a flush, the cleaner, an append) is never closed:
the eviction checks the pin count under the same lock a pin takes, so closing is safe
against concurrent readers. When every candidate is held, the cache stays above its
bound until one is released (the bound is soft, by at most the segments in use at once).

Threads: ``opened`` is called from whichever thread opened the files (the loop, the
fsync thread, a storage worker), never while the caller holds a segment lock; victims
are closed outside the cache's own lock.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import Protocol

__all__ = ["FDS_PER_SEGMENT", "FILE_HANDLES", "FileHandleCache"]

logger = logging.getLogger(__name__)

#: Descriptors one segment holds at most: its ``.log`` and, per index, the write
#: descriptor of an active index and the mapping's own (an mmap dups its descriptor).
FDS_PER_SEGMENT = 5


class _Cached(Protocol):
    _used: bool

    def evict_files(self) -> int: ...


class FileHandleCache:
    """Segments holding open files, in least-recently-registered order."""

    def __init__(self, max_descriptors: int | None = None) -> None:
        self._lock = threading.Lock()
        self._open: OrderedDict[_Cached, None] = OrderedDict()
        self._capacity: int | None = None
        self.evictions = 0  # segments closed by the bound (for logs, tests, benchmarks)
        self.configure(max_descriptors)

    def configure(self, max_descriptors: int | None) -> None:
        """Bound the cache at ``max_descriptors`` (None or <= 0: unbounded)."""
        if max_descriptors is None or max_descriptors <= 0:
            self._capacity = None
        else:
            self._capacity = max(2, max_descriptors // FDS_PER_SEGMENT)
        self._shrink(None)

    @property
    def max_descriptors(self) -> int | None:
        cap = self._capacity
        return None if cap is None else cap * FDS_PER_SEGMENT

    def __len__(self) -> int:
        return len(self._open)

    def opened(self, seg: _Cached) -> None:
        """``seg`` opened a file: it is the most recent; close others beyond the bound."""
        with self._lock:
            self._open[seg] = None
            self._open.move_to_end(seg)
            if self._capacity is None or len(self._open) <= self._capacity:
                return
        self._shrink(seg)

    def forget(self, seg: _Cached) -> None:
        """``seg`` closed all its files (idle close, freed)."""
        with self._lock:
            self._open.pop(seg, None)

    def _shrink(self, keep: _Cached | None) -> None:
        while True:
            victims = self._pick(keep)
            if not victims:
                return
            held = []
            for victim in victims:
                try:
                    closed = victim.evict_files()
                except OSError:
                    logger.exception("closing the files of %r failed", victim)
                    closed = -1
                if closed < 0:
                    held.append(victim)
                else:
                    self.evictions += 1
            if held:
                with self._lock:  # still open: back at the recent end, tried last
                    for victim in held:
                        self._open[victim] = None
                return

    def _pick(self, keep: _Cached | None) -> list[_Cached]:
        """Take the victims out of the cache: least recent first, used ones get a second
        chance (moved to the recent end with their flag cleared)."""
        with self._lock:
            cap = self._capacity
            if cap is None:
                return []
            over = len(self._open) - cap
            victims: list[_Cached] = []
            scanned, limit = 0, 2 * len(self._open)
            while over > len(victims) and scanned < limit and self._open:
                scanned += 1
                seg, _ = self._open.popitem(last=False)
                if seg is keep or seg._used:
                    seg._used = False if seg is not keep else seg._used
                    self._open[seg] = None
                    continue
                victims.append(seg)
            return victims


#: The process's cache (descriptors are a per-process resource); the LogManager sets
#: its bound from ``log.file.handles.max``. Unbounded until then.
FILE_HANDLES = FileHandleCache()
