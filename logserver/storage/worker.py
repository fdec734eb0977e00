"""The storage worker: one thread where slow disk work runs while the loop only awaits it.

One thread, so jobs run in the order they were submitted (a topic deleted and then created
again under the same name is deleted first) and never race each other on the disk.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


class StorageWorker:
    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="storage")

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        """Run ``fn(*args)`` on the worker thread; the caller's loop stays free meanwhile."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def close(self) -> None:
        """Wait for every submitted job, then stop the thread."""
        self._executor.shutdown(wait=True)
