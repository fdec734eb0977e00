"""``queued.max.request.bytes``: a broker-wide budget of bytes of requests in flight.

As Kafka's memory pool for requests: a frame's announced size is reserved when its size
prefix is read and released once its response is complete (or the connection is gone).
While the budget is spent, a connection with a new frame to start stops reading and
waits in line; it is woken, in arrival order, when reservations are released. Like
Kafka's pool, a reservation is granted while any budget is left, so one frame may take
the budget past its limit (by at most ``socket.request.max.bytes``) and a frame larger
than the whole budget is still served. A frame that has its reservation can always be
read to its end, so connections cannot deadlock each other half-way through frames.

Sans-I/O: no sockets or asyncio here; wake-ups are plain callbacks.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

__all__ = ["RequestBudget"]


class RequestBudget:
    """Bytes of requests in flight over all connections; ``limit`` None is no limit."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.used = 0
        #: Reservations refused so far (each one paused a connection).
        self.refused = 0
        self._waiting: OrderedDict[object, Callable[[], None]] = OrderedDict()

    @property
    def available(self) -> int | None:
        return None if self.limit is None else self.limit - self.used

    def try_reserve(self, nbytes: int) -> bool:
        """Take ``nbytes`` if any budget is left (Kafka's non-strict pool)."""
        if self.limit is not None and self.used >= self.limit:
            self.refused += 1
            return False
        self.used += nbytes
        return True

    def release(self, nbytes: int) -> None:
        """Give back a reservation; wakes waiters while budget is left."""
        self.used -= nbytes
        assert self.used >= 0, "released more request bytes than were reserved"
        while self._waiting and (self.limit is None or self.used < self.limit):
            _, wake = self._waiting.popitem(last=False)
            wake()

    def wait(self, key: object, wake: Callable[[], None]) -> None:
        """Call ``wake()`` once budget is freed (``key`` waits once; see :meth:`forget`)."""
        self._waiting[key] = wake

    def forget(self, key: object) -> None:
        """``key`` no longer waits (its connection closed)."""
        self._waiting.pop(key, None)

    @property
    def waiting(self) -> int:
        return len(self._waiting)
