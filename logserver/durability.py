"""When appended data reaches the disk: after the write, after an fsync, or on a timer.

Per partition, as Kafka: ``flush.messages`` (broker default
``log.flush.interval.messages``) fsyncs after that many appended batches, and 1
acknowledges a produce only after an fsync that covers it; ``flush.ms`` (broker default
``log.flush.interval.ms``) fsyncs at most that long after the partition's first unflushed
append. A log without a ``config`` (one object with ``flush_messages`` / ``flush_ms``)
follows the broker-wide values. fsyncs run on one worker thread and are shared: every
append that arrived while an fsync was running is covered by the next one (group
commit), so many producers cost one fsync per round, not one each, and the event loop
never blocks on the disk.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from logserver.latency import latency_histogram

log = logging.getLogger(__name__)


_NEVER = 2**63 - 1


class Flushable(Protocol):
    def flush(self) -> object: ...


class Durability:
    def __init__(self, interval_messages: int, interval_ms: int | None,
                 on_flushed: Callable[[list[Flushable]], None] | None = None) -> None:
        self.fsync_every_append = interval_messages == 1  # the broker-wide default
        self._interval_messages = interval_messages
        self._interval_ms = interval_ms
        self._on_flushed = on_flushed
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fsync")
        self._dirty: dict[Flushable, int] = {}
        self._waiters: list[asyncio.Future[None]] = []
        self._round: asyncio.Task[None] | None = None
        # The one timer armed for the earliest flush.ms deadline of the dirty logs.
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = 0.0
        self.fsync_rounds = 0
        self.flush_latency = latency_histogram()  # per flush round (admin /metrics)

    @property
    def mode(self) -> str:
        if self.fsync_every_append:
            return "fsync every append"
        if self._interval_ms is not None:
            return f"fsync every {self._interval_ms} ms"
        if self._interval_messages < _NEVER:
            return f"fsync every {self._interval_messages} batches"
        return "ack after write (page cache)"

    def start(self) -> None:
        """Nothing runs until a log has something to flush (kept for the engines' order)."""

    def _policy(self, log_: Flushable) -> tuple[int, int]:
        """(flush.messages, flush.ms) of ``log_``: its topic's, else the broker's."""
        config = getattr(log_, "config", None)
        if config is not None:
            return config.flush_messages, config.flush_ms
        return self._interval_messages, _NEVER if self._interval_ms is None else self._interval_ms

    def appended(self, log_: Flushable) -> Awaitable[None] | None:
        """Note an append; returns what the acknowledgement must wait for, if anything."""
        count = self._dirty.get(log_, 0) + 1
        self._dirty[log_] = count
        messages, ms = self._policy(log_)
        if messages == 1:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(future)
            self._start_round()
            return future
        if count >= messages:
            self._start_round()
        elif count == 1 and ms < _NEVER:
            self._flush_within(ms)
        return None

    def _flush_within(self, ms: int) -> None:
        """A flush round at most ``ms`` from now (the earliest deadline wins)."""
        loop = asyncio.get_running_loop()
        due = loop.time() + ms / 1000
        if self._timer is not None:
            if self._timer_due <= due:
                return
            self._timer.cancel()
        self._timer, self._timer_due = loop.call_at(due, self._on_timer), due

    def _on_timer(self) -> None:
        self._timer = None
        if self._dirty:
            self._start_round()

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

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._round is not None:
            await self._round
        self._executor.shutdown(wait=True)


def _flush_all(logs: list[Flushable]) -> None:
    for log_ in logs:
        log_.flush()
