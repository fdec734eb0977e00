"""The fault run's checker (tests/helpers/faultrun/checker.py) on hand-built histories: a good one
passes, and each kind of bad one (lost, duplicated, reordered record, aborted or partial
transaction visible, committed offset going back, stale read) is caught and named."""

from __future__ import annotations

from helpers.faultrun.checker import check, client_resends, summary
from helpers.faultrun.history import (
    ABORTED,
    COMMITTED,
    UNKNOWN,
    Ack,
    CommitAck,
    EndRead,
    History,
    OffsetRead,
    Txn,
    plain_value,
    txn_value,
)

GROUP, TXN_GROUP = "commits", "txn-group"


def good() -> History:
    """Two producers on partition 0, one on partition 1; two committed transactions, an
    aborted and an unknown one (not applied); commits and reads that move forward."""
    h = History(txn_group=TXN_GROUP)
    h.log = {0: [(0, plain_value("a", 0)), (1, plain_value("b", 0)), (2, plain_value("a", 1)),
                 (3, plain_value("a", 3))],  # a:2 failed and was never written: allowed
             1: [(0, plain_value("c", 0)), (1, plain_value("c", 1))]}
    h.acks = [Ack(0, 0, plain_value("a", 0), 1.0), Ack(0, 1, plain_value("b", 0), 1.1),
              Ack(0, 2, plain_value("a", 1), 2.0), Ack(1, 1, plain_value("c", 1), 2.5)]
    h.txns = [Txn(0, (0, 1), 1, COMMITTED, 3.0), Txn(1, (0, 1), 2, ABORTED, 4.0),
              Txn(2, (0, 1), 3, COMMITTED, 5.0), Txn(3, (0, 1), 4, UNKNOWN, 6.0)]
    h.committed_log = {0: [(0, txn_value(0, 0)), (5, txn_value(2, 0))],
                       1: [(0, txn_value(0, 1)), (5, txn_value(2, 1))]}
    h.commits = [CommitAck(GROUP, 0, 1, 1.5), CommitAck(GROUP, 0, 3, 2.5),
                 CommitAck(TXN_GROUP, 0, 1, 3.0), CommitAck(TXN_GROUP, 0, 3, 5.0)]
    h.offset_reads = [OffsetRead(GROUP, 0, 1, 2.0), OffsetRead(GROUP, 0, 3, 2.4),  # early: allowed
                      OffsetRead(GROUP, 0, 3, 3.0), OffsetRead(TXN_GROUP, 0, 1, 4.5),
                      OffsetRead(TXN_GROUP, 0, 3, 5.5), OffsetRead(TXN_GROUP, 0, 4, 7.0)]
    h.end_reads = [EndRead(0, 1, 0.5), EndRead(0, 3, 2.1), EndRead(1, 2, 3.0)]
    return h


def props(h: History) -> set[str]:
    return {v.prop for v in check(h)}


def test_a_good_history_passes():
    assert check(good()) == []
    assert set(summary([]).values()) == {0}


def test_lost_acknowledged_record():
    h = good()
    h.log[0] = [r for r in h.log[0] if r[0] != 2]
    assert props(h) == {"lost"}
    assert "a:000000001" in str(check(h)[0])


def test_acknowledged_record_at_another_offset_is_lost_there():
    h = good()
    h.log[1] = [(0, plain_value("c", 1)), (1, plain_value("c", 0))]  # swapped
    assert props(h) == {"lost", "order"}


def test_duplicate_record():
    h = good()
    h.log[0].append((4, plain_value("b", 0)))
    assert "duplicate" in props(h)
    assert summary(check(h))["duplicate"] == 1


def resent() -> History:
    """Seed 8 of the fault run, in small: producer "a" (id 7) stored a:1 at offset 2 under
    epoch 0 but was answered "possibly persisted"; a retry burst split by a leader change
    got OUT_OF_ORDER_SEQUENCE_NUMBER for a later batch, librdkafka bumped the epoch and
    sent a:1 again as epoch 1 sequence 0 (offset 4), acknowledged there, a:2 after it."""
    h = good()
    h.log[0] = [(0, plain_value("a", 0)), (1, plain_value("b", 0)), (2, plain_value("a", 1)),
                (3, plain_value("b", 1)), (4, plain_value("a", 1)), (5, plain_value("a", 2))]
    h.writers = {0: {0: (7, 0, 0), 1: (8, 0, 0), 2: (7, 0, 1), 3: (8, 0, 1), 4: (7, 1, 0),
                     5: (7, 1, 1)},
                 1: {0: (9, 0, 0), 1: (9, 0, 1)}}
    h.acks = [Ack(0, 0, plain_value("a", 0), 1.0), Ack(0, 1, plain_value("b", 0), 1.1),
              Ack(0, 3, plain_value("b", 1), 2.1), Ack(0, 4, plain_value("a", 1), 3.0),
              Ack(0, 5, plain_value("a", 2), 3.0), Ack(1, 1, plain_value("c", 1), 2.5)]
    return h


def test_a_record_resent_by_the_client_under_a_new_epoch_is_no_broker_duplicate():
    h = resent()
    assert check(h) == []
    assert client_resends(h) == {plain_value("a", 1): [(0, 2, (7, 0, 1)), (0, 4, (7, 1, 0))]}


def test_the_same_epoch_and_sequence_stored_twice_is_the_brokers_duplicate():
    h = resent()
    h.writers[0][4] = (7, 0, 1)  # deduplication failed within one epoch
    assert props(h) == {"duplicate", "order"}
    assert client_resends(h) == {}


def test_a_copy_acknowledged_and_then_stored_again_is_a_duplicate():
    h = resent()
    h.acks.append(Ack(0, 2, plain_value("a", 1), 2.0))  # the client was told it is at 2
    assert props(h) == {"duplicate", "order"}


def test_a_duplicate_without_its_writers_known_is_a_duplicate():
    h = resent()
    del h.writers[0][2]
    assert props(h) == {"duplicate", "order"}


def test_reordered_records_of_one_producer():
    h = good()
    h.log[0] = [(0, plain_value("a", 0)), (1, plain_value("b", 0)), (2, plain_value("a", 3)),
                (3, plain_value("a", 1))]
    h.acks = [a for a in h.acks if a.partition != 0]
    assert props(h) == {"order"}


def test_aborted_transaction_visible():
    h = good()
    h.committed_log[0].append((3, txn_value(1, 0)))
    h.committed_log[1].append((3, txn_value(1, 1)))
    assert props(h) == {"aborted-visible"}


def test_partial_transaction_visible():
    h = good()
    h.committed_log[1] = [r for r in h.committed_log[1] if r[1] != txn_value(2, 1)]
    assert props(h) == {"partial-transaction"}


def test_partial_unknown_transaction_visible():
    h = good()
    h.committed_log[0].append((7, txn_value(3, 0)))
    assert props(h) == {"partial-transaction"}


def test_committed_transaction_missing_entirely():
    h = good()
    h.committed_log = {0: [(0, txn_value(0, 0))], 1: [(0, txn_value(0, 1))]}
    assert props(h) == {"partial-transaction"}


def test_aborted_transactions_offsets_visible_in_its_group():
    h = good()
    h.offset_reads.append(OffsetRead(TXN_GROUP, 0, 2, 4.1))
    assert "aborted-visible" in props(h)


def test_committed_offset_going_backwards():
    h = good()
    h.offset_reads.append(OffsetRead(GROUP, 0, 1, 3.5))
    assert props(h) == {"offset-backwards"}


def test_committed_offset_below_an_acknowledged_commit():
    h = good()
    h.offset_reads = [OffsetRead(GROUP, 0, 1, 2.6)]  # commit of 3 acknowledged at 2.5
    assert props(h) == {"offset-backwards"}


def test_stale_read_of_the_log_end():
    h = good()
    h.end_reads.append(EndRead(0, 2, 2.2))  # offset 2 acknowledged at 2.0: end must be > 2
    assert props(h) == {"stale-read"}


def test_acknowledged_without_an_offset_is_found_by_value():
    h = good()
    h.acks.append(Ack(0, None, plain_value("a", 3), 3.0))
    assert check(h) == []
    h.log[0] = [r for r in h.log[0] if r[1] != plain_value("a", 3)]
    assert props(h) == {"lost"}
    assert "offset unknown" in str(check(h)[0])
