"""One member's way from its current assignment to its target (Kafka's CurrentAssignmentBuilder).

The rule that keeps two members from reading one partition: a partition goes to its new
owner only once no other member holds it, and a member that must give partitions up
gets nothing new (and keeps its epoch) until a heartbeat shows it no longer owns them.

- STABLE at the target epoch: nothing to do.
- Partitions to revoke: UNREVOKED_PARTITIONS; ``assigned`` drops them at once (so the
  member is told), ``revoking`` keeps them counted as its own until acknowledged.
- Otherwise the member moves to the target epoch and gets every target partition that
  is free; the ones still held by others make it UNRELEASED_PARTITIONS, and later
  heartbeats pick them up as they are released.
"""

from __future__ import annotations

from collections.abc import Callable

from logserver.groups.consumer.model import (
    Member,
    MemberState,
    Partitions,
    copy_partitions,
    intersect,
    minus,
)


def reconcile(member: Member, target_epoch: int, target: Partitions,
              held_by_other: Callable[[str, int], bool], owned: Partitions | None) -> bool:
    """Advance ``member`` (in place) given what it reported owning (None: not said).
    Returns True when its epoch, state or partitions changed."""
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owned is None or intersect(owned, member.revoking):
            return False  # not acknowledged yet
    elif member.state is MemberState.STABLE and member.epoch == target_epoch:
        return False
    before = (member.epoch, member.state, copy_partitions(member.assigned),
              copy_partitions(member.revoking))
    current = member.assigned  # revoking partitions are released by the acknowledgement
    kept = intersect(current, target)
    revoke = minus(current, target)
    if revoke:
        member.state = MemberState.UNREVOKED_PARTITIONS
        member.assigned = kept
        member.revoking = revoke
    else:
        wanted = minus(target, current)
        free: Partitions = {}
        unreleased = False
        for topic, partitions in wanted.items():
            for partition in partitions:
                if held_by_other(topic, partition):
                    unreleased = True
                else:
                    free.setdefault(topic, set()).add(partition)
        for topic, partitions in free.items():
            kept.setdefault(topic, set()).update(partitions)
        if member.epoch != target_epoch:
            member.previous_epoch = member.epoch
            member.epoch = target_epoch
        member.state = (MemberState.UNRELEASED_PARTITIONS if unreleased
                        else MemberState.STABLE)
        member.assigned = kept
        member.revoking = {}
    after = (member.epoch, member.state, member.assigned, member.revoking)
    return before != after
