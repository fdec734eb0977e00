"""The transaction coordinator's decisions, without I/O (Kafka's TransactionCoordinator).

Each request becomes a ``Step``: an error, or the records the glue must write in order:
``prepare`` (a state record that must be durable before any marker), ``markers`` (commit
or abort control batches for every partition of the transaction, the groups'
``__consumer_offsets`` partitions among them: their marker makes the TxnOffsetCommit
offsets waiting there visible, or drops them), then ``complete`` (the state record after
them). ``Markers.offsets`` only carries offsets that a transaction recorded by an older
version of this server kept in its own state.
The glue serialises steps per transactional id, so no two of them interleave.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkaproto import ErrorCode
from logserver.transactions.metadata import (
    PendingOffset,
    TopicPartition,
    TxnMetadata,
    TxnState,
)

__all__ = ["MAX_EPOCH", "Markers", "Step", "TxnMachine"]

MAX_EPOCH = 32767


@dataclass(frozen=True)
class Markers:
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]
    offsets: dict[str, dict[TopicPartition, PendingOffset]] = field(default_factory=dict)


@dataclass
class Step:
    error: int = ErrorCode.NONE
    prepare: TxnMetadata | None = None
    markers: Markers | None = None
    complete: TxnMetadata | None = None
    producer_id: int = -1
    producer_epoch: int = -1


def _failed(error: int) -> Step:
    return Step(error=error)


def _finished(meta: TxnMetadata, state: TxnState, now: int) -> TxnMetadata:
    done = meta.copy()
    done.state = state
    done.partitions = set()
    done.pending_offsets = {}
    done.start_ms = -1
    done.last_update_ms = now
    return done


class TxnMachine:
    """Pure transitions over ``TxnMetadata``; the caller keeps the metadata map."""

    def __init__(self, max_timeout_ms: int) -> None:
        self.max_timeout_ms = max_timeout_ms

    # -- InitProducerId -------------------------------------------------------------

    @staticmethod
    def needs_new_producer_id(meta: TxnMetadata | None) -> bool:
        return meta is None or meta.producer_epoch >= MAX_EPOCH - 1

    def init_producer(self, meta: TxnMetadata | None, *, transactional_id: str,
                      timeout_ms: int, producer_id: int, producer_epoch: int,
                      new_producer_id: int | None, now: int) -> Step:
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return _failed(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        if meta is None:
            # A transactional id never seen (or expired): as Kafka, fresh metadata is valid
            # for whatever producer id and epoch the request presents (KIP-360 recovery after
            # expiry, or clients such as @platformatic/kafka that always send id 0, epoch 0);
            # they are ignored and a new id at epoch 0 is handed out.
            assert new_producer_id is not None
            fresh = TxnMetadata(transactional_id, new_producer_id, 0, timeout_ms,
                                TxnState.EMPTY, last_update_ms=now)
            return Step(complete=fresh, producer_id=new_producer_id, producer_epoch=0)
        if meta.in_prepare:
            return _failed(ErrorCode.CONCURRENT_TRANSACTIONS)
        if producer_id >= 0 and (producer_id != meta.producer_id or producer_epoch not in (
                meta.producer_epoch, meta.last_epoch)):
            return _failed(ErrorCode.PRODUCER_FENCED)
        if meta.producer_epoch >= MAX_EPOCH - 1:
            assert new_producer_id is not None
            new_id, new_epoch = new_producer_id, 0
        else:
            new_id, new_epoch = meta.producer_id, meta.producer_epoch + 1
        step = Step(producer_id=new_id, producer_epoch=new_epoch)
        if meta.state == TxnState.ONGOING:
            # An unfinished transaction of an older incarnation (a zombie) is aborted
            # with the new epoch, which also fences the old one at every partition.
            marker_epoch = new_epoch if new_id == meta.producer_id else meta.producer_epoch
            aborting = meta.copy()
            aborting.state = TxnState.PREPARE_ABORT
            aborting.producer_epoch = marker_epoch
            aborting.last_update_ms = now
            step.prepare = aborting
            step.markers = Markers(meta.producer_id, marker_epoch, False,
                                   frozenset(meta.partitions))
        done = _finished(meta, TxnState.EMPTY, now)
        done.last_epoch = meta.producer_epoch if new_id == meta.producer_id else -1
        done.producer_id, done.producer_epoch, done.timeout_ms = new_id, new_epoch, timeout_ms
        step.complete = done
        return step

    # -- checks shared by the other requests ----------------------------------------

    @staticmethod
    def check_producer(meta: TxnMetadata | None, producer_id: int, producer_epoch: int) -> int:
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if meta.in_prepare:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.NONE

    # -- AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit -----------------------

    def add_partitions(self, meta: TxnMetadata | None, producer_id: int, producer_epoch: int,
                       partitions: set[TopicPartition], now: int, *,
                       group: str | None = None) -> Step:
        error = self.check_producer(meta, producer_id, producer_epoch)
        if error:
            return _failed(error)
        assert meta is not None
        if (meta.state == TxnState.ONGOING and partitions <= meta.partitions
                and (group is None or group in meta.pending_offsets)):
            return Step()
        ongoing = meta.copy()
        if meta.state != TxnState.ONGOING:
            ongoing.start_ms = now
            ongoing.partitions = set()
            ongoing.pending_offsets = {}
        ongoing.state = TxnState.ONGOING
        ongoing.partitions |= partitions
        if group is not None:
            ongoing.pending_offsets.setdefault(group, {})
        ongoing.last_update_ms = now
        return Step(complete=ongoing)

    def txn_offset_commit(self, meta: TxnMetadata | None, producer_id: int, producer_epoch: int,
                          group: str) -> Step:
        """TxnOffsetCommit's check where this node is also the transaction coordinator:
        the producer's current transaction must have taken the group in (AddOffsetsToTxn).
        Nothing is written here: the offsets wait at the group coordinator, in the
        group's ``__consumer_offsets`` partition, for this transaction's marker."""
        error = self.check_producer(meta, producer_id, producer_epoch)
        if error:
            return _failed(error)
        assert meta is not None
        if meta.state != TxnState.ONGOING or group not in meta.pending_offsets:
            return _failed(ErrorCode.INVALID_TXN_STATE)  # AddOffsetsToTxn comes first
        return Step()

    # -- EndTxn, timeouts, recovery --------------------------------------------------

    def end_txn(self, meta: TxnMetadata | None, producer_id: int, producer_epoch: int,
                commit: bool, now: int) -> Step:
        error = self.check_producer(meta, producer_id, producer_epoch)
        if error:
            return _failed(error)
        assert meta is not None
        if meta.state == TxnState.COMPLETE_COMMIT:  # a retry of what already happened
            return Step() if commit else _failed(ErrorCode.INVALID_TXN_STATE)
        if meta.state == TxnState.COMPLETE_ABORT:
            return _failed(ErrorCode.INVALID_TXN_STATE) if commit else Step()
        if meta.state != TxnState.ONGOING:
            return _failed(ErrorCode.INVALID_TXN_STATE)
        return self._end(meta, commit, meta.producer_epoch, now)

    @staticmethod
    def _end(meta: TxnMetadata, commit: bool, epoch: int, now: int) -> Step:
        prepare = meta.copy()
        prepare.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if epoch != meta.producer_epoch:
            prepare.last_epoch, prepare.producer_epoch = meta.producer_epoch, epoch
        prepare.last_update_ms = now
        return Step(prepare=prepare, markers=TxnMachine._markers(prepare),
                    complete=TxnMachine._completed(prepare, now))

    @staticmethod
    def _markers(prepare: TxnMetadata) -> Markers:
        commit = prepare.state == TxnState.PREPARE_COMMIT
        return Markers(prepare.producer_id, prepare.producer_epoch, commit,
                       frozenset(prepare.partitions),
                       prepare.pending_offsets if commit else {})

    @staticmethod
    def _completed(prepare: TxnMetadata, now: int) -> TxnMetadata:
        commit = prepare.state == TxnState.PREPARE_COMMIT
        return _finished(prepare, TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT, now)

    def expire(self, meta: TxnMetadata, now: int) -> Step | None:
        """Abort a transaction open longer than its timeout, bumping the epoch so the
        producer that abandoned it is fenced (Kafka's abortTimedOutTransactions)."""
        if meta.state != TxnState.ONGOING or meta.start_ms < 0 or now <= meta.start_ms + meta.timeout_ms:
            return None
        epoch = meta.producer_epoch + 1 if meta.producer_epoch < MAX_EPOCH - 1 else meta.producer_epoch
        return self._end(meta, False, epoch, now)

    @staticmethod
    def id_expired(meta: TxnMetadata, now: int, expiration_ms: int) -> bool:
        """transactional.id.expiration.ms: an id idle that long with nothing open is
        forgotten (its producer must InitProducerId again)."""
        return (meta.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
                and now - meta.last_update_ms > expiration_ms)

    @staticmethod
    def recover(meta: TxnMetadata, now: int) -> Step | None:
        """After a restart, a transaction whose prepare record was written is finished
        the way it was decided: its markers (and offsets) again, then the complete record."""
        if meta.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return None
        return Step(markers=TxnMachine._markers(meta), complete=TxnMachine._completed(meta, now))

    @staticmethod
    def check_produce(meta: TxnMetadata | None, producer_id: int, producer_epoch: int,
                      partition: TopicPartition) -> int:
        """A transactional batch may only go to a partition of the producer's open
        transaction (the check KIP-890 moved to the partition leader)."""
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if producer_epoch < meta.producer_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if producer_epoch > meta.producer_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if meta.state != TxnState.ONGOING or partition not in meta.partitions:
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE
