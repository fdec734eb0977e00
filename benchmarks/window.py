"""The measured window of one run: wall clock and the server's CPU over it alone.

A workload calls ``begin()`` when its warm-up is over and ``end()`` when its measured
part is, so the server's CPU share excludes start-up, topic creation, filling a log to
read and warm-up, which would otherwise dilute or inflate it.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Window:
    """Wall-clock seconds and server CPU seconds between ``begin()`` and ``end()``."""

    def __init__(self, cpu_seconds: Callable[[], float | None] = lambda: None) -> None:
        self._cpu = cpu_seconds
        self._start: float | None = None
        self._cpu_start: float | None = None
        self.seconds: float | None = None
        self.cpu_s: float | None = None

    def begin(self) -> None:
        """The measured part starts now."""
        self._cpu_start = self._cpu()
        self._start = time.perf_counter()

    def end(self) -> None:
        """The measured part ended now."""
        if self._start is None:
            raise RuntimeError("Window.end() before begin()")
        self.seconds = time.perf_counter() - self._start
        cpu = self._cpu()
        if cpu is not None and self._cpu_start is not None:
            self.cpu_s = cpu - self._cpu_start

    @property
    def closed(self) -> bool:
        return self.seconds is not None

    def metrics(self) -> dict[str, float]:
        """``window_s`` and, when the server's CPU is known, ``server_cpu_s`` and its share."""
        if self.seconds is None:
            return {}
        out = {"window_s": round(self.seconds, 3)}
        if self.cpu_s is not None and self.seconds > 0:
            out["server_cpu_s"] = round(self.cpu_s, 2)
            out["server_cpu_share"] = round(self.cpu_s / self.seconds, 3)
        return out
