"""One transactional id's state, as Kafka's TransactionMetadata keeps it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

TopicPartition = tuple[str, int]
# (offset, leader epoch, metadata) of a TxnOffsetCommit waiting for the commit
PendingOffset = tuple[int, int, str]

NO_PRODUCER_ID = -1


class TxnState(IntEnum):
    """Kafka's TransactionState ids (also the TransactionStatus byte of the log value)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7


# The names Kafka's admin APIs use (DescribeTransactions, ListTransactions).
STATE_NAMES: dict[TxnState, str] = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}

@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    last_update_ms: int = -1
    start_ms: int = -1
    # The epoch before the last bump: a producer that presents it (KIP-360, after a
    # timeout or a lost InitProducerId response) may re-initialise.
    last_epoch: int = -1
    # group id -> offsets of TxnOffsetCommit; materialised when the transaction commits
    pending_offsets: dict[str, dict[TopicPartition, PendingOffset]] = field(default_factory=dict)

    def copy(self) -> TxnMetadata:
        return TxnMetadata(
            self.transactional_id, self.producer_id, self.producer_epoch, self.timeout_ms,
            self.state, set(self.partitions), self.last_update_ms, self.start_ms,
            self.last_epoch, {g: dict(o) for g, o in self.pending_offsets.items()})

    @property
    def in_prepare(self) -> bool:
        return self.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
                              TxnState.PREPARE_EPOCH_FENCE)
