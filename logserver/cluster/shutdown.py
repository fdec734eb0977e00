"""Controlled shutdown (Kafka's ``controlled.shutdown.enable``), the pure decision: what a
stopping broker's partitions become before it leaves, so that clients see a leader
change (NOT_LEADER_OR_FOLLOWER, a metadata refresh) instead of a dead leader whose
partitions stay unavailable until the controller notices.

The node writes each new state with a compare-and-swap on the partition's key (so a
newer decision by the controller or a leader is never overwritten), waits for its watch
to show them, then exits (logserver.cluster.node).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from logserver.cluster.model import PartitionState


def without_replica(state: PartitionState, node: int, live: Iterable[int]) -> PartitionState | None:
    """``state`` once ``node`` stops; None when nothing is to change (or can change).

    Led by ``node``: leadership moves to the first other live ISR member in replica
    order (leader epoch + 1) and ``node`` leaves the ISR, as Kafka's controller does on
    ControlledShutdown; with no such member it stays (the partition goes offline when
    the broker is gone, as in Kafka). Followed by ``node`` while in sync: it leaves the
    ISR (unless it is the last member), so that acks=all stops waiting for it at once.
    """
    alive = set(live) - {node}
    others = tuple(r for r in state.isr if r != node)
    if state.leader == node:
        candidates = [r for r in state.replicas if r in others and r in alive]
        if not candidates:
            return None
        return replace(state, leader=candidates[0], leader_epoch=state.leader_epoch + 1,
                       isr=others, partition_epoch=state.partition_epoch + 1)
    if node in state.isr and others:
        return replace(state, isr=others, partition_epoch=state.partition_epoch + 1)
    return None
