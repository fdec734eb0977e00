"""The server side of one Kafka connection, sans-I/O: request frames in, responses out in order.

Input: 4-byte size framing into a reusable staging buffer; a frame too large for it gets
a buffer of its own that the socket fills directly. That buffer grows with the bytes
that arrive (doubling, from ``BIG_INITIAL_BYTES``), never to the announced size at once:
a size prefix costs nothing until its body comes. A size outside
``8..max_request_bytes`` (``socket.request.max.bytes``) is refused before its body is
read.
Output: every request that will be answered takes a slot in arrival order; responses
complete in any order (a long-poll fetch, an fsync before an ack) and leave strictly in
slot order, as Kafka clients require. A request that gets no answer (acks=0) takes no
slot. The asyncio glue is ``logserver.network``.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Sequence
from typing import Generic, TypeVar

__all__ = ["ServerFraming", "Slot"]

Chunk = TypeVar("Chunk")
_SIZE = struct.Struct(">i")
MIN_FRAME = 8
#: First size of a big frame's own buffer; it doubles as bytes arrive, up to the frame.
BIG_INITIAL_BYTES = 64 * 1024


class Slot(Generic[Chunk]):
    """A response's place in the connection's response order."""

    __slots__ = ("chunks", "done")

    def __init__(self) -> None:
        self.done = False
        self.chunks: Sequence[Chunk] | None = None


class ServerFraming(Generic[Chunk]):
    """Framing and in-order responses for one connection; see the module docstring."""

    def __init__(self, max_request_bytes: int, staging_bytes: int = 32 * 1024) -> None:
        self.max_request_bytes = max_request_bytes
        self._staging = bytearray(staging_bytes)
        self._staging_view = memoryview(self._staging)
        self._start = 0
        self._end = 0
        self._big: bytearray | None = None
        self._big_filled = 0
        self._big_size = 0  # the announced size of the frame ``_big`` is filling
        #: Why the input is unusable (a size prefix out of range): close the connection.
        self.failed: str | None = None
        self._slots: deque[Slot[Chunk]] = deque()
        self._ready: list[Chunk] = []

    # ---- requests in ----------------------------------------------------------------
    def get_buffer(self) -> memoryview:
        """Where the next bytes read from the socket go (asyncio.BufferedProtocol)."""
        big = self._big
        if big is not None:
            if self._big_filled == len(big):
                big = self._grow_big()
            return memoryview(big)[self._big_filled:]
        return self._staging_view[self._end:]

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
        return len(self._staging) + (len(self._big) if self._big is not None else 0)

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
        return self._parse_staged()

    def _parse_staged(self) -> list[bytearray]:
        staging = self._staging
        frames: list[bytearray] = []
        start, end = self._start, self._end
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(staging, start)
            if size < MIN_FRAME or size > self.max_request_bytes:
                self._start = self._end = 0
                self.failed = (f"frame size {size} outside {MIN_FRAME}..{self.max_request_bytes} "
                               "(socket.request.max.bytes)")
                return frames
            available = end - start - 4
            if available >= size:
                body = start + 4
                frames.append(staging[body:body + size])
                start = body + size
                continue
            if size + 4 > len(staging):
                self._big = bytearray(min(size, max(available, BIG_INITIAL_BYTES)))
                self._big_size = size
                self._big[:available] = staging[start + 4:end]
                self._big_filled = available
                self._start = self._end = 0
                return frames
            break
        if start == end:
            self._start = self._end = 0
        elif start > 0:
            remaining = end - start
            staging[:remaining] = staging[start:end]
            self._start, self._end = 0, remaining
        else:
            self._start, self._end = start, end
        return frames

    # ---- responses out --------------------------------------------------------------
    def respond(self, chunks: Sequence[Chunk]) -> None:
        """A response ready now, for the latest request."""
        if self._slots:
            slot: Slot[Chunk] = Slot()
            slot.done, slot.chunks = True, chunks
            self._slots.append(slot)
        else:
            self._ready.extend(chunks)

    def reserve(self) -> Slot[Chunk]:
        """A place for a response that will be ready later (see :meth:`complete`)."""
        slot: Slot[Chunk] = Slot()
        self._slots.append(slot)
        return slot

    def complete(self, slot: Slot[Chunk], chunks: Sequence[Chunk] | None) -> None:
        """``slot``'s response is ready (``None``: it gets no response after all)."""
        slot.done, slot.chunks = True, chunks
        slots = self._slots
        while slots and slots[0].done:
            head = slots.popleft()
            if head.chunks:
                self._ready.extend(head.chunks)

    def take_output(self) -> list[Chunk]:
        """Everything that may be sent now, in order; the caller sends all of it."""
        out, self._ready = self._ready, []
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
        """The slots never completed (their work can be cancelled); drops all output."""
        lost = [slot for slot in self._slots if not slot.done]
        self._slots.clear()
        self._ready.clear()
        return lost
