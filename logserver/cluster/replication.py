"""The leader's view of its followers, sans I/O: log end offsets, high watermark, ISR
changes to propose, and the acks=all produce requests waiting for the high watermark.

Kafka's rules: a follower's fetch offset is its log end offset; the high watermark is
the minimum log end offset over the ISR and never goes back; a follower that has not
been caught up to the leader's log end for ``replica.lag.time.max.ms`` leaves the ISR,
and one that reaches the high watermark joins it again. ISR changes are only proposed
here; they take effect when the compare-and-swap in etcd succeeds and the watch brings
the new partition state back.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from kafkaproto import ErrorCode
from logserver.cluster.model import PartitionState, high_watermark


@dataclass
class _Follower:
    leo: int = 0
    caught_up_ms: float = 0.0  # last time its log end offset reached the leader's
    last_fetch_leo: int = 0  # the leader's log end offset when it last fetched
    last_fetch_ms: float = 0.0


@dataclass
class LeaderReplica:
    """One partition this broker leads, at one leader epoch."""

    node_id: int
    state: PartitionState
    hw: int
    started_ms: float
    #: the log end offset when this leader epoch began (Kafka's epoch start offset): a
    #: high watermark below it still lags what the previous leader may have acknowledged
    epoch_start: int = 0
    followers: dict[int, _Follower] = field(default_factory=dict)
    _waiters: list[tuple[int, asyncio.Future[int]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for replica in self.state.replicas:
            if replica != self.node_id:
                # Kafka: a new leader treats its followers as caught up at the start.
                self.followers[replica] = _Follower(0, self.started_ms)

    @property
    def lagging(self) -> bool:
        """KIP-207: the high watermark has not yet reached the start of this epoch."""
        return self.hw < self.epoch_start

    def update_state(self, state: PartitionState) -> None:
        """The same leader epoch with another ISR (or partition epoch)."""
        self.state = state

    def follower_fetched(self, replica: int, fetch_offset: int, leader_leo: int,
                         now_ms: float) -> None:
        follower = self.followers.setdefault(replica, _Follower(0, now_ms))
        follower.leo = fetch_offset
        # Kafka's rule: caught up now, or caught up to where the leader was at its
        # previous fetch (under steady writes a follower is never exactly at the end).
        if fetch_offset >= leader_leo:
            follower.caught_up_ms = now_ms
        elif fetch_offset >= follower.last_fetch_leo:
            follower.caught_up_ms = max(follower.caught_up_ms, follower.last_fetch_ms)
        follower.last_fetch_leo, follower.last_fetch_ms = leader_leo, now_ms

    def advance(self, leader_leo: int) -> bool:
        """Recompute the high watermark; True when it moved (waiters are then resolved)."""
        leos = {r: f.leo for r, f in self.followers.items()}
        hw = max(self.hw, high_watermark(self.node_id, leader_leo, leos, self.state.isr))
        if hw == self.hw:
            return False
        self.hw = hw
        still = []
        for end, future in self._waiters:
            if end <= hw:
                if not future.done():
                    future.set_result(ErrorCode.NONE)
            else:
                still.append((end, future))
        self._waiters = still
        return True

    def wait_for(self, end_offset: int) -> asyncio.Future[int]:
        """Resolves with NONE once the high watermark reaches ``end_offset``."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if end_offset <= self.hw:
            future.set_result(ErrorCode.NONE)
        else:
            self._waiters.append((end_offset, future))
        return future

    def fail_waiters(self, error: int) -> None:
        for _, future in self._waiters:
            if not future.done():
                future.set_result(error)
        self._waiters = []

    # -- ISR proposals --------------------------------------------------------------------

    def to_add(self) -> list[int]:
        """Followers outside the ISR that have reached the high watermark."""
        return [r for r, f in self.followers.items()
                if r not in self.state.isr and r in self.state.replicas and f.leo >= self.hw]

    def to_remove(self, now_ms: float, lag_max_ms: int) -> list[int]:
        """ISR followers not caught up for longer than ``replica.lag.time.max.ms``."""
        return [r for r in self.state.isr if r != self.node_id
                and now_ms - self.followers.get(r, _Follower(0, self.started_ms)).caught_up_ms
                > lag_max_ms]
