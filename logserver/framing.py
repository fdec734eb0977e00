"""The server side of one Kafka connection, sans-I/O: request frames in, responses out in order.

Input: 4-byte size framing into a staging buffer that exists only while bytes are
buffered: it is allocated when the socket has bytes to read and dropped once every frame
in it is taken, so an idle connection holds no input buffer. A frame too large for it gets
a buffer of its own that the socket fills directly. That buffer grows with the bytes
that arrive (doubling, from ``BIG_INITIAL_BYTES``), never to the announced size at once:
a size prefix costs nothing until its body comes. A size outside
``8..max_request_bytes`` (``socket.request.max.bytes``) is refused before its body is
read. With a :class:`~logserver.request_budget.RequestBudget`
(``queued.max.request.bytes``), each frame's size is reserved before it is taken; while
none is left the framing is :attr:`blocked` and parses nothing more until
:meth:`unblock`. The caller releases each returned frame's ``len(frame)`` once it is
answered.
Output: every request that will be answered takes a slot in arrival order; responses
complete in any order (a long-poll fetch, an fsync before an ack) and leave strictly in
slot order, as Kafka clients require. A request that gets no answer (acks=0) takes no
slot. The asyncio glue is ``logserver.network``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from logserver.request_budget import RequestBudget

__all__ = ["ServerFraming", "Slot"]

Chunk = TypeVar("Chunk")
_SIZE = struct.Struct(">i")
MIN_FRAME = 8
#: First size of a big frame's own buffer; it doubles as bytes arrive, up to the frame.
BIG_INITIAL_BYTES = 64 * 1024
#: Staging buffers given up by connections with nothing buffered, by size, for the next
#: read of any connection: a busy connection reuses one instead of allocating and zeroing
#: 32 KiB per read. At most this many are kept (their memory is the only idle cost).
SPARE_STAGING = 16
_spare: dict[int, list[bytearray]] = {}


class Slot(Generic[Chunk]):
    """A response's place in the connection's response order."""

    __slots__ = ("chunks", "done")

    def __init__(self) -> None:
        self.done = False
        self.chunks: Sequence[Chunk] | None = None


class ServerFraming(Generic[Chunk]):
    """Framing and in-order responses for one connection; see the module docstring."""

    __slots__ = ("max_request_bytes", "_budget", "blocked", "_head_reserved", "_staging_bytes",
                 "_staging", "_start", "_end", "_big", "_big_filled", "_big_size", "failed",
                 "_slots", "_ready", "ready_bytes")

    def __init__(self, max_request_bytes: int, staging_bytes: int = 32 * 1024,
                 budget: RequestBudget | None = None) -> None:
        self.max_request_bytes = max_request_bytes
        self._budget = budget
        #: The budget refused the next frame: read nothing more until :meth:`unblock`.
        self.blocked = False
        self._head_reserved = False  # the frame at the staging start has its reservation
        self._staging_bytes = staging_bytes
        #: Allocated by :meth:`get_buffer`, dropped when empty (an idle connection has none).
        self._staging: bytearray | None = None
        self._start = 0
        self._end = 0
        self._big: bytearray | None = None
        self._big_filled = 0
        self._big_size = 0  # the announced size of the frame ``_big`` is filling
        #: Why the input is unusable (a size prefix out of range): close the connection.
        self.failed: str | None = None
        # Lists, not deques: an empty deque costs ~600 bytes per idle connection; these
        # hold a handful of entries (at most queued.max.requests).
        self._slots: list[Slot[Chunk]] = []
        self._ready: list[Chunk] = []
        #: Bytes of the responses in :meth:`take_output`'s next answer (record regions
        #: count their length), for the caller's back-pressure.
        self.ready_bytes = 0

    # ---- requests in ----------------------------------------------------------------
    def get_buffer(self) -> memoryview:
        """Where the next bytes read from the socket go (asyncio.BufferedProtocol)."""
        big = self._big
        if big is not None:
            if self._big_filled == len(big):
                big = self._grow_big()
            return memoryview(big)[self._big_filled:]
        staging = self._staging
        if staging is None:
            spare = _spare.get(self._staging_bytes)
            staging = spare.pop() if spare else bytearray(self._staging_bytes)
            self._staging = staging
        return memoryview(staging)[self._end:]

    def _grow_big(self) -> bytearray:
        """Double the big frame's buffer (never beyond its announced size)."""
        big = self._big
        assert big is not None
        extra = min(max(len(big), BIG_INITIAL_BYTES), self._big_size - len(big))
        try:
            big.extend(bytes(extra))
        except BufferError:  # a view of it is still held somewhere: grow a copy
            grown = bytearray(len(big) + extra)
            grown[:len(big)] = big
            self._big = big = grown
        return big

    @property
    def buffered_bytes(self) -> int:
        """Bytes of memory this connection's input holds now (staging and big frame)."""
        staged = len(self._staging) if self._staging is not None else 0
        return staged + (len(self._big) if self._big is not None else 0)

    def buffer_updated(self, nbytes: int) -> list[bytearray]:
        """``nbytes`` were written into the last buffer; returns the frames now complete.

        Each frame is the request without its size prefix, in a buffer of its own. A
        size outside ``8..max_request_bytes`` sets :attr:`failed` and ends the input: the
        frames before it are still returned.
        """
        if self.failed is not None:
            return []
        if self._big is not None:
            self._big_filled += nbytes
            if self._big_filled < self._big_size:
                return []
            frame, self._big = self._big, None
            return [frame]
        self._end += nbytes
        if self.blocked:
            return []
        return self._parse_staged()

    def unblock(self) -> list[bytearray]:
        """Try the frame the budget refused again; returns the frames now complete."""
        if not self.blocked or self.failed is not None:
            return []
        self.blocked = False
        return self._parse_staged()

    def _reserve(self, size: int) -> bool:
        if self._budget is None or self._budget.try_reserve(size):
            return True
        self.blocked = True
        return False

    def _parse_staged(self) -> list[bytearray]:
        staging = self._staging
        frames: list[bytearray] = []
        if staging is None:
            return frames
        start, end = self._start, self._end
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(staging, start)
            if size < MIN_FRAME or size > self.max_request_bytes:
                self._start = self._end = 0
                self._staging = None
                self.failed = (f"frame size {size} outside {MIN_FRAME}..{self.max_request_bytes} "
                               "(socket.request.max.bytes)")
                return frames
            if not self._head_reserved:
                if not self._reserve(size):
                    break
                self._head_reserved = True
            available = end - start - 4
            if available >= size:
                body = start + 4
                frames.append(staging[body:body + size])
                start = body + size
                self._head_reserved = False
                continue
            if size + 4 > len(staging):
                self._big = bytearray(min(size, max(available, BIG_INITIAL_BYTES)))
                self._big_size = size
                self._head_reserved = False  # the big frame holds the reservation now
                self._big[:available] = staging[start + 4:end]
                self._big_filled = available
                self._start = self._end = 0
                self._give_up_staging()
                return frames
            break
        if start == end:
            self._start = self._end = 0
            self._give_up_staging()  # nothing buffered: the next read takes one afresh
        elif start > 0:
            remaining = end - start
            staging[:remaining] = staging[start:end]
            self._start, self._end = 0, remaining
        else:
            self._start, self._end = start, end
        return frames

    def _give_up_staging(self) -> None:
        staging, self._staging = self._staging, None
        if staging is not None:
            spare = _spare.setdefault(len(staging), [])
            if len(spare) < SPARE_STAGING:
                spare.append(staging)

    # ---- responses out --------------------------------------------------------------
    def respond(self, chunks: Sequence[Chunk]) -> None:
        """A response ready now, for the latest request."""
        if self._slots:
            slot: Slot[Chunk] = Slot()
            slot.done, slot.chunks = True, chunks
            self._slots.append(slot)
        else:
            self._ready.extend(chunks)
            self.ready_bytes += _size(chunks)

    def reserve(self) -> Slot[Chunk]:
        """A place for a response that will be ready later (see :meth:`complete`)."""
        slot: Slot[Chunk] = Slot()
        self._slots.append(slot)
        return slot

    def complete(self, slot: Slot[Chunk], chunks: Sequence[Chunk] | None) -> None:
        """``slot``'s response is ready (``None``: it gets no response after all)."""
        slot.done, slot.chunks = True, chunks
        slots = self._slots
        done = 0
        while done < len(slots) and slots[done].done:
            head = slots[done]
            done += 1
            if head.chunks:
                self._ready.extend(head.chunks)
                self.ready_bytes += _size(head.chunks)
        if done:
            del slots[:done]

    def take_output(self) -> list[Chunk]:
        """Everything that may be sent now, in order; the caller sends all of it."""
        out, self._ready = self._ready, []
        self.ready_bytes = 0
        return out

    @property
    def has_output(self) -> bool:
        return bool(self._ready)

    @property
    def waiting(self) -> int:
        """Responses that are not sendable yet (not ready, or behind one that is not)."""
        return len(self._slots)

    def held_output(self) -> list[Chunk]:
        """Every chunk held and not yet taken (ready, or completed behind a pending slot),
        so the caller can release what will never be sent."""
        held = list(self._ready)
        for slot in self._slots:
            if slot.done and slot.chunks:
                held.extend(slot.chunks)
        return held

    def close(self) -> list[Slot[Chunk]]:
        """The slots never completed (their work can be cancelled); drops all output and
        the budget reserved for a frame half read."""
        if self._budget is not None:
            if self._big is not None:
                self._budget.release(self._big_size)
            elif self._head_reserved and self._staging is not None:
                self._budget.release(_SIZE.unpack_from(self._staging, self._start)[0])
        self._big = None
        self._head_reserved = False
        lost = [slot for slot in self._slots if not slot.done]
        self._slots.clear()
        self._ready.clear()
        self.ready_bytes = 0
        return lost


def _size(chunks: Sequence[object]) -> int:
    """Bytes of response chunks: ``bytes`` by length, record regions by ``.length``."""
    total = 0
    for chunk in chunks:
        total += len(chunk) if isinstance(chunk, (bytes, bytearray, memoryview)) else \
            getattr(chunk, "length", 0)
    return total
