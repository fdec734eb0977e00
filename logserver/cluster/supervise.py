"""Background loops of a cluster broker that never die silently.

A loop that raises is logged with its traceback and started again after a backoff; one
that returns is logged and started again too (each is meant to run until cancelled).
Without this an exception nobody retrieved ended a broker's session or watch for good
while it went on serving requests.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class Backoff:
    """Exponential delays from ``first`` to ``most`` seconds, reset on success."""

    def __init__(self, first: float = 0.1, most: float = 5.0) -> None:
        self.first, self.most = first, most
        self.delay = first

    def next(self) -> float:
        delay, self.delay = self.delay, min(self.delay * 2, self.most)
        return delay

    def reset(self) -> None:
        self.delay = self.first


async def supervised(name: str, loop: Callable[[], Awaitable[None]]) -> None:
    """Run ``loop()`` for ever: restarted, loudly, whenever it fails or returns."""
    backoff = Backoff()
    while True:
        try:
            await loop()
            log.error("%s ended unexpectedly; starting it again", name)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s failed; starting it again", name)
        await asyncio.sleep(backoff.next())
