"""Recent request rates per API, for ``/v1/requests``: the counters' growth over the last
10 seconds and the last minute, from snapshots taken once a second by the admin listener
(the hot path keeps only its totals; nothing here runs per request).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable

WINDOWS_SECONDS = (10, 60)
TICK_SECONDS = 1.0

Counts = Callable[[], dict[str, int]]


class RecentRates:
    """Snapshots of cumulative counts; ``rates`` gives per-second growth over each window."""

    def __init__(self, counts: Counts, clock: Callable[[], float] = time.monotonic) -> None:
        self._counts = counts
        self._clock = clock
        self._snapshots: deque[tuple[float, dict[str, int]]] = deque(
            maxlen=max(WINDOWS_SECONDS) + 2)
        self._task: asyncio.Task[None] | None = None

    def sample(self) -> None:
        self._snapshots.append((self._clock(), dict(self._counts())))

    def rates(self) -> dict[str, dict[int, float]]:
        """name -> {window seconds: per second}; the growth since the oldest snapshot in
        the window (a window not yet full uses what there is; none yet: 0)."""
        now, current = self._clock(), self._counts()
        result: dict[str, dict[int, float]] = {name: {} for name in current}
        for window in WINDOWS_SECONDS:
            then = next(((t, c) for t, c in self._snapshots if now - t <= window + 0.5), None)
            for name, count in current.items():
                if then is None or now - then[0] <= 0:
                    result[name][window] = 0.0
                else:
                    grown = count - then[1].get(name, 0)
                    result[name][window] = round(max(grown, 0) / (now - then[0]), 3)
        return result

    async def start(self, _: object = None) -> None:
        self.sample()
        self._task = asyncio.get_running_loop().create_task(self._tick())

    async def close(self, _: object = None) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            self.sample()
