"""The one clock the broker's components read, injected rather than called directly, so
that a test (or a simulation) can drive time and every component agrees on it.

``wall_ms`` is epoch time, for what is stored or compared with record timestamps
(commit timestamps, transaction start and expiry). ``monotonic`` / ``monotonic_ms`` never
go back, for deadlines, intervals and lag.
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["SYSTEM_CLOCK", "Clock", "SystemClock"]


class Clock(Protocol):
    def wall_ms(self) -> int:
        """Milliseconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (its origin is arbitrary)."""
        ...

    def monotonic_ms(self) -> float:
        """The same in milliseconds."""
        ...


class SystemClock:
    """The host's clocks."""

    def wall_ms(self) -> int:
        return int(time.time() * 1000)

    def monotonic(self) -> float:
        return time.monotonic()

    def monotonic_ms(self) -> float:
        return time.monotonic() * 1000


SYSTEM_CLOCK: Clock = SystemClock()
