"""Background loops of a cluster broker that never die silently.

A loop that raises is logged with its traceback and started again after a backoff; one
that returns is logged and started again too (each is meant to run until cancelled).
Without this an exception nobody retrieved ended a broker's session or watch for good
while it went on serving requests.
"""

from __future__ import annotations

import asyncio
import io
import logging
import time
from collections.abc import Awaitable, Callable

from kafkaproto.client import Backoff, Failures

log = logging.getLogger(__name__)

RESTART_BACKOFF = Backoff.seconds(0.1, 5.0)


async def supervised(name: str, loop: Callable[[], Awaitable[None]]) -> None:
    """Run ``loop()`` for ever: restarted, loudly, whenever it fails or returns."""
    failures = Failures(RESTART_BACKOFF)
    while True:
        try:
            await loop()
            log.error("%s ended unexpectedly; starting it again", name)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                raise  # we are being stopped
            # Not a stop: a cancellation leaked from a library call (gRPC cancels the
            # calls of a closed channel). Ending here would end the loop silently.
            log.exception("%s got a stray cancellation; starting it again", name)
        except Exception:
            log.exception("%s failed; starting it again", name)
        await asyncio.sleep(failures.failed())


class StallWatch:
    """Says, with the stacks of the tasks involved, when something that should end soon
    (getting a session again) has not ended after ``limit_s``: an await that never
    returns logs nothing by itself. Once per ``limit_s``."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.since: float | None = None
        self._told = 0.0

    def start(self) -> None:
        self.since, self._told = time.monotonic(), 0.0

    def stop(self) -> None:
        self.since = None

    def check(self, what: str, tasks: list[asyncio.Task[object] | None]) -> None:
        now = time.monotonic()
        if self.since is None or now - self.since < self.limit_s or now - self._told < self.limit_s:
            return
        self._told = now
        stacks = io.StringIO()
        for task in tasks:
            if task is not None and not task.done():
                stacks.write("\n  ".join([f"{task.get_name()}:", *awaiting(task)]) + "\n")
        log.warning("%s for %.0f s; where it waits:\n%s", what, now - self.since, stacks.getvalue())


def awaiting(task: asyncio.Task[object]) -> list[str]:
    """The chain of awaits a suspended task is in, outermost first (``print_stack``
    shows only the outermost coroutine of a suspended task)."""
    out = []
    step: object = task.get_coro()
    for _ in range(50):
        frame = getattr(step, "cr_frame", None) or getattr(step, "ag_frame", None)
        if frame is None:
            out.append(f"waits on {step!r}"[:300])
            break
        out.append(f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
        step = getattr(step, "cr_await", None) or getattr(step, "ag_await", None)
        if step is None:
            break
    return out
