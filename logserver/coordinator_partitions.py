"""Which partitions of its internal topic a coordinator serves, and the loads under way.

The group coordinator (``__consumer_offsets``) and the transaction coordinator
(``__transaction_state``) share this shape: on a single node they serve every key (no
partitions tracked); in a cluster they serve the keys of the partitions this broker leads,
each once replayed from the local replica (COORDINATOR_LOAD_IN_PROGRESS meanwhile,
NOT_COORDINATOR for the others), and a partition whose leadership moves away is dropped,
its load cancelled. What a load replays and what dropping forgets stays with each
coordinator.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from kafkaproto import ErrorCode

__all__ = ["CoordinatorPartitions"]


class CoordinatorPartitions:
    def __init__(self) -> None:
        # the partitions led and loaded here (None: a single node, every one)
        self.owned: set[int] | None = None
        self.loads: dict[int, asyncio.Task[None]] = {}

    def start_partitioned(self) -> None:
        """Cluster mode: serve none until told which this broker leads."""
        self.owned = set()

    def begin_load(self, partition: int,
                   load: Callable[[int], Coroutine[Any, Any, None]]) -> None:
        """Run ``load(partition)`` unless it is served or being loaded (or single node)."""
        if self.owned is None or partition in self.owned or partition in self.loads:
            return
        self.loads[partition] = asyncio.get_running_loop().create_task(load(partition))

    def still_loading(self, partition: int) -> bool:
        """Inside a load: is it still wanted (not dropped or replaced meanwhile)?"""
        return self.owned is not None and self.loads.get(partition) is asyncio.current_task()

    def loaded(self, partition: int) -> None:
        """The load (the current task, ``still_loading``) is done: serve the partition."""
        assert self.owned is not None
        self.owned.add(partition)
        del self.loads[partition]

    def drop(self, partition: int) -> tuple[bool, bool]:
        """Leadership moved away: cancel its load and stop serving it. Returns (was
        served, was loading)."""
        task = self.loads.pop(partition, None)
        if task is not None:
            task.cancel()
        if self.owned is None or partition not in self.owned:
            return False, task is not None
        self.owned.discard(partition)
        return True, task is not None

    def error(self, partition: int) -> int | None:
        """COORDINATOR_LOAD_IN_PROGRESS while loading, NOT_COORDINATOR when another broker
        leads it, None when served here."""
        if self.owned is None:
            return None
        if partition in self.loads:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return None if partition in self.owned else ErrorCode.NOT_COORDINATOR

    def cancel_loads(self) -> list[asyncio.Task[None]]:
        """Closing: the loads under way, cancelled (for the caller to await)."""
        tasks = list(self.loads.values())
        self.loads.clear()
        for task in tasks:
            task.cancel()
        return tasks
