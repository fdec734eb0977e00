"""When appended data reaches the disk: after the write, after an fsync, or on a timer.

``log.flush.interval.messages=1`` acknowledges a produce only after an fsync that covers
it. fsyncs run on one worker thread and are shared: every append that arrived while an
fsync was running is covered by the next one (group commit), so many producers cost one
fsync per round, not one each, and the event loop never blocks on the disk.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from logserver.latency import LatencyHistogram

log = logging.getLogger(__name__)


class Flushable(Protocol):
    def flush(self) -> object: ...


class Durability:
    def __init__(self, interval_messages: int, interval_ms: int | None,
                 on_flushed: Callable[[list[Flushable]], None] | None = None) -> None:
        self.fsync_every_append = interval_messages == 1
        self._interval_messages = interval_messages
        self._interval_ms = interval_ms
        self._on_flushed = on_flushed
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fsync")
        self._dirty: dict[Flushable, int] = {}
        self._waiters: list[asyncio.Future[None]] = []
        self._round: asyncio.Task[None] | None = None
        self._timer: asyncio.Task[None] | None = None
        self.fsync_rounds = 0
        self.flush_latency = LatencyHistogram()  # per flush round (admin /metrics)

    @property
    def mode(self) -> str:
        if self.fsync_every_append:
            return "fsync every append"
        if self._interval_ms is not None:
            return f"fsync every {self._interval_ms} ms"
        if self._interval_messages < 2**63 - 1:
            return f"fsync every {self._interval_messages} batches"
        return "ack after write (page cache)"

    def start(self) -> None:
        if self._interval_ms is not None:
            self._timer = asyncio.get_running_loop().create_task(self._tick())

    def appended(self, log_: Flushable) -> Awaitable[None] | None:
        """Note an append; returns what the acknowledgement must wait for, if anything."""
        count = self._dirty.get(log_, 0) + 1
        self._dirty[log_] = count
        if self.fsync_every_append:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(future)
            self._start_round()
            return future
        if count >= self._interval_messages:
            self._start_round()
        return None

    def _start_round(self) -> None:
        if self._round is None:
            self._round = asyncio.get_running_loop().create_task(self._flush_rounds())

    async def _flush_rounds(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._dirty:
                logs, self._dirty = list(self._dirty), {}
                waiters, self._waiters = self._waiters, []
                started = time.perf_counter()
                try:
                    await loop.run_in_executor(self._executor, _flush_all, logs)
                except Exception as exc:
                    log.error("fsync failed: %s", exc)
                    for waiter in waiters:
                        if not waiter.done():
                            waiter.set_exception(exc)
                    continue
                self.fsync_rounds += 1
                self.flush_latency.observe(time.perf_counter() - started)
                if self._on_flushed is not None:
                    self._on_flushed(logs)
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_result(None)
        finally:
            self._round = None

    async def _tick(self) -> None:
        assert self._interval_ms is not None
        while True:
            await asyncio.sleep(self._interval_ms / 1000)
            if self._dirty:
                self._start_round()

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._round is not None:
            await self._round
        self._executor.shutdown(wait=True)


def _flush_all(logs: list[Flushable]) -> None:
    for log_ in logs:
        log_.flush()
