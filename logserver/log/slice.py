"""What a fetch gets from the log: whole batches of one segment, pinned until sent.

A ``SegmentSlice`` holds a reference on its segment, so the segment's descriptor stays
open (and keeps naming the same file) however the log changes meanwhile: retention,
truncation, a compaction swap or a topic deletion only take effect for the slice once
it is released. The descriptor itself never leaves this package; the sender gets the
operations it needs (``read``, ``sendfile_to``) and must call ``release()`` once, on
every path (sent, connection gone, response dropped, error). A slice dropped without
that is released soon after it is garbage collected (by the next read of any log, not
inside the collector, which may run while a segment's lock is held), and counted in
``leaked_slices``.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from typing import TYPE_CHECKING

from kafkaproto import FileRegion

if TYPE_CHECKING:
    from logserver.log.segment import Segment

logger = logging.getLogger(__name__)

__all__ = ["SegmentSlice", "leaked_slices", "release_collected"]

_leaked = 0
_collected: deque[Segment] = deque()  # pins of collected slices, released by release_collected


def leaked_slices() -> int:
    """How many slices were garbage collected instead of released by their sender."""
    return _leaked


def release_collected() -> None:
    """Drop the pins of slices the garbage collector took (called outside any lock)."""
    while _collected:
        try:
            segment = _collected.popleft()
        except IndexError:
            return
        segment.unpin()


class SegmentSlice(FileRegion):
    """``length`` bytes at ``position`` of one segment file (whole record batches)."""

    __slots__ = ("_segment", "position", "length", "base_offset")

    def __init__(self, segment: Segment, position: int, length: int) -> None:
        """Take over a pin the caller holds on ``segment``."""
        self._segment: Segment | None = segment
        self.position = position
        self.length = length
        self.base_offset = segment.base_offset  # of the segment (for logs and tests)

    def __repr__(self) -> str:
        state = "released" if self._segment is None else "pinned"
        return (f"SegmentSlice(segment {self.base_offset}, position {self.position}, "
                f"{self.length} bytes, {state})")

    @property
    def released(self) -> bool:
        return self._segment is None

    def _fd(self) -> int:
        segment = self._segment
        if segment is None:
            raise ValueError("slice already released")
        return segment.fd

    def read(self, start: int = 0, size: int | None = None) -> bytes:
        """The slice's bytes from ``start`` (relative), ``size`` of them (default: to the end).

        Fewer bytes than asked means the file shrank (a truncation under the reader).
        """
        count = self.length - start if size is None else min(size, self.length - start)
        if start < 0 or count < 0:
            raise ValueError(f"range {start}+{size} outside a slice of {self.length} bytes")
        return os.pread(self._fd(), count, self.position + start)

    def sendfile_to(self, socket_fd: int, start: int, count: int) -> int:
        """``os.sendfile`` of ``count`` bytes from ``start`` (relative) to a socket.

        Returns the bytes sent (0: the file ends early); raises BlockingIOError when
        the (non-blocking) socket is full.
        """
        count = min(count, self.length - start)
        if start < 0 or count <= 0:
            return 0
        return os.sendfile(socket_fd, self._fd(), self.position + start, count)

    def release(self) -> None:
        """Unpin the segment (idempotent); the last reader of a deleted one closes it."""
        segment, self._segment = self._segment, None
        if segment is not None:
            segment.unpin()

    def __enter__(self) -> SegmentSlice:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def __del__(self) -> None:
        segment = getattr(self, "_segment", None)
        if segment is not None:
            global _leaked
            _leaked += 1
            self._segment = None
            _collected.append(segment)  # atomic; no lock may be taken inside the collector
