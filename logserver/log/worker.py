"""Storage work that must not run on the event loop, and the loop's way to await it.

Compaction, retention deletes and checkpoint writes block on the disk for milliseconds
to minutes; the loop hands them to a ``StorageWorker`` and awaits the result, so every
connection keeps being served meanwhile.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import ParamSpec, TypeVar

__all__ = ["StorageWorker"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


class StorageWorker:
    """A small named thread pool for blocking storage jobs."""

    def __init__(self, name_prefix: str, max_workers: int = 1) -> None:
        self.name_prefix = name_prefix
        self._executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=name_prefix)
        self._closed = False

    async def run(self, fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """Run ``fn(*args, **kwargs)`` on a worker thread; the caller's loop only awaits."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    def submit(self, fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> Future[_T]:
        """Start ``fn`` on a worker thread without waiting (fire and forget, or poll)."""
        return self._executor.submit(fn, *args, **kwargs)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self, *, wait: bool = True) -> None:
        """Refuse new jobs; with ``wait``, return once the running and queued ones ended."""
        self._closed = True
        self._executor.shutdown(wait=wait)
