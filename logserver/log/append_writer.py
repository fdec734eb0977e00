"""A thread that writes large appends, so a 1 MB ``pwrite`` does not stall the event loop.

With 1 MB produce batches most of the broker's time went to the segment ``pwrite`` on
the loop thread: every other connection waited meanwhile and the second core idled.
A ``Log`` given an ``AppendWriter`` still assigns offsets on the loop at once (the
*assigned* end offset moves), but hands the write of a batch of at least ``min_bytes``
(and of every batch behind one still queued, to keep the order) to this thread;
fetchers and the high watermark see only what is written (the *written* end offset).

One thread with one FIFO queue serves every log: the order of a log's writes is the
order they were handed over, and the loop only ever waits for a write when it must (a
segment roll, a truncation, a close). The setting is ``log.writer.thread.min.bytes``
(-1, the default, turns the thread off). Measured with benchmarks/large_appends.py at
256 KiB: the p99 latency of small requests beside 1 MB batches 9-30x lower, but the
1 MB batches' throughput 0.72-1.01x (the thread needs the interpreter lock back after
every write, behind a busy loop), so it is off unless asked for.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import ParamSpec, TypeVar

__all__ = ["AppendWriter"]

logger = logging.getLogger(__name__)

_P = ParamSpec("_P")
_T = TypeVar("_T")


class AppendWriter:
    """Runs write jobs one at a time, in the order submitted, on one named thread."""

    def __init__(self, min_bytes: int, name: str = "log-writer") -> None:
        if min_bytes < 0:
            raise ValueError("min_bytes must be >= 0")
        self.min_bytes = min_bytes
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    def submit(self, fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> Future[_T]:
        """Queue ``fn(*args, **kwargs)`` behind every job submitted before it."""
        return self._executor.submit(fn, *args, **kwargs)

    def close(self) -> None:
        """Finish the queued writes, then stop the thread."""
        self._executor.shutdown(wait=True)
        logger.debug("append writer stopped")
