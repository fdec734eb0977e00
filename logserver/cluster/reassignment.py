"""Partition reassignment as Kafka does it (KIP-455), sans I/O: the partition states a
move goes through. Each is written by a compare-and-swap on the partition's etcd key.

1. ``begin``: the replica set grows to the target plus the replicas leaving
   (``adding`` = target - original, ``removing`` = original - target). The new replicas
   create their local logs from the watch and fetch from the leader as followers.
2. They reach the high watermark, and the leader adds them to the ISR as it adds any
   follower.
3. ``complete`` (the controller, once every target replica is in the ISR): the replica
   set becomes the target; the leaving replicas leave the ISR; a leader that is not in
   the target hands leadership to the first in-sync target replica, with a new leader
   epoch, so the old leader's requests are fenced. Leaving replicas stop and delete their
   local copies when their watch sees the new state.

``cancel`` (null target replicas) puts the original replica set back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from logserver.cluster.model import NO_LEADER, ClusterModel, PartitionState


def reassigning(state: PartitionState) -> bool:
    return bool(state.adding or state.removing)


def original_replicas(state: PartitionState) -> tuple[int, ...]:
    """The replica set before the move under way (the current one when none is)."""
    return tuple(r for r in state.replicas if r not in state.adding)


def target_replicas(state: PartitionState) -> tuple[int, ...]:
    return tuple(r for r in state.replicas if r not in state.removing)


def begin(state: PartitionState, target: tuple[int, ...]) -> PartitionState:
    """The state that starts moving to ``target`` (replacing a move under way, which is
    measured from its original replicas, as Kafka does)."""
    original = original_replicas(state)
    adding = tuple(r for r in target if r not in original)
    removing = tuple(r for r in original if r not in target)
    replicas = (*target, *removing)
    isr = tuple(r for r in state.isr if r in replicas)
    return replace(state, replicas=replicas, isr=isr or state.isr, adding=adding,
                   removing=removing, partition_epoch=state.partition_epoch + 1)


def cancel(state: PartitionState) -> PartitionState:
    """Back to the original replicas; raises ValueError when none of them is in sync
    (the move cannot be undone without losing acknowledged records)."""
    original = original_replicas(state)
    isr = tuple(r for r in state.isr if r in original)
    if not isr:
        raise ValueError("no original replica is in sync")
    return _settle(state, original, isr)


def complete(state: PartitionState, live: Iterable[int]) -> PartitionState | None:
    """The controller's step: the move is done once every target replica is in the ISR
    and one of them is alive to lead; None while it is not (or no move is under way)."""
    if not reassigning(state):
        return None
    target = target_replicas(state)
    if any(r not in state.isr for r in target):
        return None
    alive = set(live)
    if state.leader not in target and not any(r in alive for r in target):
        return None
    return _settle(state, target, tuple(r for r in target if r in state.isr), alive)


def _settle(state: PartitionState, replicas: tuple[int, ...], isr: tuple[int, ...],
            alive: set[int] | None = None) -> PartitionState:
    leader, epoch = state.leader, state.leader_epoch
    if leader not in replicas or leader == NO_LEADER:
        candidates = [r for r in isr if alive is None or r in alive]
        leader = candidates[0] if candidates else NO_LEADER
        epoch += 1
    return replace(state, replicas=replicas, isr=isr, leader=leader, leader_epoch=epoch,
                   adding=(), removing=(), partition_epoch=state.partition_epoch + 1)


def unassigned(model: ClusterModel, node_id: int, local: Mapping[str, int]
               ) -> tuple[list[str], list[tuple[str, int]]]:
    """Local copies this broker no longer holds a replica of (moved away, also while it
    was down): topics of which it holds no partition any more, to delete, and single
    partitions, to empty. ``local``: topic -> local partition count. Topics whose
    partition states are not all known yet are left alone."""
    topics: list[str] = []
    partitions: list[tuple[str, int]] = []
    for name, count in local.items():
        record = model.topics.get(name)
        if record is None:
            continue
        states = [model.partition(name, i) for i in range(record.partitions)]
        if any(s is None for s in states):
            continue
        mine = [node_id in s.replicas for s in states if s is not None]
        if not any(mine):
            topics.append(name)
        else:
            partitions += [(name, i) for i, held in enumerate(mine) if not held and i < count]
    return topics, partitions
