"""Offsets of TxnOffsetCommit waiting for their transaction's marker (Kafka's
``pendingTransactionalOffsetCommits`` of GroupMetadataManager).

The group coordinator appends a TxnOffsetCommit's records to the group's
``__consumer_offsets`` partition as a transactional batch of the producer, and holds them
here, per producer id and group, until the transaction coordinator's marker reaches that
partition: a commit marker makes them the group's committed offsets (unless a later
commit already superseded one: the record further on in the log wins), an abort marker
drops them. Replaying the partition rebuilds them the same way (``loading.Replay``):
batches whose marker is in the log are resolved, the others wait for their marker.
"""

from __future__ import annotations

from collections.abc import Callable

from logserver.groups.group import CommittedOffset

__all__ = ["PendingTxnOffsets", "TopicPartition", "newer"]

TopicPartition = tuple[str, int]
# group id -> partition -> offset (with its record's log offset)
ByGroup = dict[str, dict[TopicPartition, CommittedOffset]]


def newer(current: CommittedOffset | None, candidate: CommittedOffset) -> bool:
    """Does ``candidate`` replace ``current``? The one whose record is further on in the
    log wins (Kafka's CommitRecordMetadataAndOffset.olderThan)."""
    return current is None or current.log_offset < candidate.log_offset


class PendingTxnOffsets:
    """Producer id -> group -> the offsets its open transaction committed."""

    def __init__(self) -> None:
        self.by_producer: dict[int, ByGroup] = {}

    def __bool__(self) -> bool:
        return bool(self.by_producer)

    def add(self, producer_id: int, group_id: str,
            offsets: dict[TopicPartition, CommittedOffset]) -> None:
        """Later commits of the same transaction replace earlier ones."""
        held = self.by_producer.setdefault(producer_id, {}).setdefault(group_id, {})
        for tp, committed in offsets.items():
            if newer(held.get(tp), committed):
                held[tp] = committed

    def discard(self, producer_id: int, group_id: str,
                offsets: dict[TopicPartition, CommittedOffset]) -> None:
        """A TxnOffsetCommit whose append failed: its offsets never count."""
        groups = self.by_producer.get(producer_id)
        held = None if groups is None else groups.get(group_id)
        if held is None or groups is None:
            return
        for tp, committed in offsets.items():
            if held.get(tp) is committed:
                del held[tp]
        if not held:
            del groups[group_id]
        if not groups:
            del self.by_producer[producer_id]

    def take(self, producer_id: int, wanted: Callable[[str], bool]) -> ByGroup:
        """Remove and return the producer's offsets for the groups ``wanted`` selects
        (those of the partition a marker reached)."""
        groups = self.by_producer.get(producer_id)
        if groups is None:
            return {}
        taken = {g: offsets for g, offsets in groups.items() if wanted(g)}
        for group_id in taken:
            del groups[group_id]
        if not groups:
            del self.by_producer[producer_id]
        return taken

    def drop_groups(self, wanted: Callable[[str], bool]) -> int:
        """Forget the groups ``wanted`` selects (their partition moved to another
        broker, which replays them); returns how many producers' offsets went."""
        dropped = 0
        for producer_id in list(self.by_producer):
            dropped += len(self.take(producer_id, wanted)) > 0
        return dropped

    def partitions(self, group_id: str) -> set[TopicPartition]:
        """Partitions of ``group_id`` with offsets waiting in an open transaction."""
        pending: set[TopicPartition] = set()
        for groups in self.by_producer.values():
            pending.update(groups.get(group_id, ()))
        return pending

    def merge(self, other: PendingTxnOffsets, wanted: Callable[[str], bool]) -> None:
        """Take the replayed ``other``'s offsets of the groups ``wanted`` selects."""
        for producer_id, groups in other.by_producer.items():
            for group_id, offsets in groups.items():
                if wanted(group_id):
                    self.add(producer_id, group_id, offsets)

    def resolve(self, producer_id: int, commit: bool, committed: ByGroup,
                wanted: Callable[[str], bool] = lambda _: True) -> ByGroup:
        """A marker for ``producer_id``: on commit its offsets go into ``committed``
        (group -> offsets) where newer; returns what was taken, either way."""
        taken = self.take(producer_id, wanted)
        if commit:
            for group_id, offsets in taken.items():
                target = committed.setdefault(group_id, {})
                for tp, offset in offsets.items():
                    if newer(target.get(tp), offset):
                        target[tp] = offset
        return taken
