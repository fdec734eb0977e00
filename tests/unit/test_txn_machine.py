"""The transaction coordinator's state machine, the state-record codec and the partition
transaction index, without sockets; and the coordinator's start-up recovery of prepared
transactions on a real data directory."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from kafkaproto import ErrorCode
from kafkaproto.batch import parse_header
from kafkaproto.control import build_marker
from kafkaproto.records import build_batch
from logserver.broker import Broker
from logserver.config import load_config
from logserver.log.txn_index import PartitionTxns, control_type
from logserver.transactions.machine import MAX_EPOCH, TxnMachine
from logserver.transactions.metadata import TxnMetadata, TxnState
from logserver.transactions.records import decode_key, decode_value, encode_key, encode_value

pytestmark = pytest.mark.timeout(60)

T0 = 1_700_000_000_000
TP = ("orders", 0)


def machine() -> TxnMachine:
    return TxnMachine(max_timeout_ms=60_000)


def init(m: TxnMachine, meta: TxnMetadata | None, **kw: int) -> TxnMetadata:
    step = m.init_producer(meta, transactional_id="tx", timeout_ms=kw.get("timeout", 10_000),
                           producer_id=kw.get("pid", -1), producer_epoch=kw.get("epoch", -1),
                           new_producer_id=kw.get("new_id", 7), now=T0)
    assert step.error == ErrorCode.NONE
    assert step.complete is not None
    return step.complete


def test_init_then_commit_goes_through_prepare_and_complete():
    m = machine()
    meta = init(m, None)
    assert (meta.producer_id, meta.producer_epoch, meta.state) == (7, 0, TxnState.EMPTY)
    step = m.add_partitions(meta, 7, 0, {TP}, T0 + 1)
    assert step.complete is not None and step.complete.state == TxnState.ONGOING
    meta = step.complete
    assert meta.start_ms == T0 + 1
    end = m.end_txn(meta, 7, 0, True, T0 + 2)
    assert end.prepare is not None and end.prepare.state == TxnState.PREPARE_COMMIT
    assert end.markers is not None and end.markers.commit and end.markers.partitions == {TP}
    assert end.complete is not None and end.complete.state == TxnState.COMPLETE_COMMIT
    assert end.complete.partitions == set()
    # a retried EndTxn(commit) succeeds; an abort after the commit does not
    assert m.end_txn(end.complete, 7, 0, True, T0 + 3).error == ErrorCode.NONE
    assert m.end_txn(end.complete, 7, 0, False, T0 + 3).error == ErrorCode.INVALID_TXN_STATE


def test_epoch_bump_aborts_the_zombie_transaction_and_fences_it():
    m = machine()
    meta = m.add_partitions(init(m, None), 7, 0, {TP}, T0).complete
    assert meta is not None
    step = m.init_producer(meta, transactional_id="tx", timeout_ms=10_000, producer_id=-1,
                           producer_epoch=-1, new_producer_id=None, now=T0 + 5)
    assert step.markers is not None and not step.markers.commit
    assert (step.markers.producer_id, step.markers.producer_epoch) == (7, 1)
    assert step.prepare is not None and step.prepare.state == TxnState.PREPARE_ABORT
    assert step.complete is not None and step.complete.producer_epoch == 1
    fresh = step.complete
    assert m.add_partitions(fresh, 7, 0, {TP}, T0).error == ErrorCode.PRODUCER_FENCED
    assert m.end_txn(fresh, 7, 0, True, T0).error == ErrorCode.PRODUCER_FENCED
    assert m.check_produce(fresh, 7, 0, TP) == ErrorCode.INVALID_PRODUCER_EPOCH


def test_kip360_reinit_with_current_or_previous_epoch_only():
    m = machine()
    meta = init(m, init(m, None), new_id=99)  # epoch 1, last epoch 0
    assert (meta.producer_id, meta.producer_epoch, meta.last_epoch) == (7, 1, 0)
    again = init(m, meta, pid=7, epoch=0)
    assert again.producer_epoch == 2
    step = m.init_producer(again, transactional_id="tx", timeout_ms=10_000, producer_id=7,
                           producer_epoch=0, new_producer_id=None, now=T0)
    assert step.error == ErrorCode.PRODUCER_FENCED
    step = m.init_producer(again, transactional_id="tx", timeout_ms=10_000, producer_id=8,
                           producer_epoch=2, new_producer_id=None, now=T0)
    assert step.error == ErrorCode.PRODUCER_FENCED


def test_new_transactional_id_ignores_the_presented_producer_id_and_epoch():
    """As Kafka: no INVALID_PRODUCER_ID_MAPPING from InitProducerId; a transactional id
    without metadata gets a new id at epoch 0 whatever id and epoch the request names."""
    m = machine()
    for pid, epoch in ((0, 0), (7, 3), (123456, -1)):
        meta = init(m, None, pid=pid, epoch=epoch, new_id=42)
        assert (meta.producer_id, meta.producer_epoch, meta.state) == (42, 0, TxnState.EMPTY)


def test_exhausted_epoch_gets_a_new_producer_id():
    m = machine()
    meta = init(m, None)
    meta.producer_epoch = MAX_EPOCH - 1
    assert m.needs_new_producer_id(meta)
    bumped = init(m, meta, new_id=1234)
    assert (bumped.producer_id, bumped.producer_epoch) == (1234, 0)


def test_timeout_bounds_and_expiry():
    m = machine()
    for bad in (0, -1, 60_001):
        step = m.init_producer(None, transactional_id="tx", timeout_ms=bad, producer_id=-1,
                               producer_epoch=-1, new_producer_id=1, now=T0)
        assert step.error == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    meta = m.add_partitions(init(m, None, timeout=1000), 7, 0, {TP}, T0).complete
    assert meta is not None
    assert m.expire(meta, T0 + 1000) is None
    step = m.expire(meta, T0 + 1001)
    assert step is not None and step.markers is not None and not step.markers.commit
    assert step.markers.producer_epoch == 1  # the abandoned producer is fenced
    assert step.complete is not None and step.complete.state == TxnState.COMPLETE_ABORT


def test_offsets_only_after_add_offsets_and_marked_with_the_transaction():
    m = machine()
    meta = m.add_partitions(init(m, None), 7, 0, {TP}, T0).complete
    assert meta is not None
    assert m.txn_offset_commit(meta, 7, 0, "g").error == ErrorCode.INVALID_TXN_STATE
    meta = m.add_partitions(meta, 7, 0, {("__consumer_offsets", 0)}, T0, group="g").complete
    assert meta is not None
    step = m.txn_offset_commit(meta, 7, 0, "g")
    assert step.error == ErrorCode.NONE and step.complete is None  # nothing to write here
    assert m.txn_offset_commit(meta, 7, 1, "g").error == ErrorCode.PRODUCER_FENCED
    # the group's offsets partition gets the marker, which completes the offsets there
    for commit in (False, True):
        markers = m.end_txn(meta, 7, 0, commit, T0).markers
        assert markers is not None and ("__consumer_offsets", 0) in markers.partitions
        assert not any(markers.offsets.values())  # none kept in the transaction's state


def test_produce_only_into_added_partitions():
    m = machine()
    meta = init(m, None)
    assert m.check_produce(meta, 7, 0, TP) == ErrorCode.INVALID_TXN_STATE
    meta = m.add_partitions(meta, 7, 0, {TP}, T0).complete
    assert m.check_produce(meta, 7, 0, TP) == ErrorCode.NONE
    assert m.check_produce(meta, 7, 0, ("orders", 1)) == ErrorCode.INVALID_TXN_STATE
    assert m.check_produce(meta, 8, 0, TP) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert m.check_produce(None, 7, 0, TP) == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_state_record_round_trip():
    meta = TxnMetadata("tx-é", 12, 3, 60_000, TxnState.PREPARE_COMMIT,
                       {("a", 0), ("a", 2), ("b", 1)}, T0, T0 - 5, 2,
                       {"g": {("in", 0): (10, 4, "meta"), ("in", 1): (11, -1, "")}})
    assert decode_key(encode_key(meta.transactional_id)) == "tx-é"
    assert decode_value("tx-é", encode_value(meta)) == meta


def test_partition_index_lso_and_aborted_ranges():
    txns = PartitionTxns()

    def data(pid: int, offset: int) -> None:
        batch = build_batch([(None, b"v", (), T0)], producer_id=pid, producer_epoch=0,
                            base_sequence=0, is_transactional=True)
        txns.on_batch(parse_header(batch), offset)

    data(1, 0)
    data(2, 1)
    data(1, 2)
    assert txns.last_stable_offset(10) == 0
    txns.on_marker(1, 3, commit=False)
    assert txns.last_stable_offset(10) == 1
    txns.on_marker(2, 4, commit=True)
    assert txns.last_stable_offset(10) == 10
    assert [(a.producer_id, a.first_offset) for a in txns.aborted_between(0, 10)] == [(1, 0)]
    assert txns.aborted_between(4, 10) == []
    marker = build_marker(1, 0, commit=False, coordinator_epoch=0, timestamp_ms=T0)
    assert control_type(bytes(marker[61:70])) == 0


# -- start-up recovery on a real data directory -------------------------------------------


def _run(data_dir: Path, scenario) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        config = load_config({"log.dirs": str(data_dir)}, environ={})
        broker = Broker(config)
        broker.open()
        await broker.start()
        try:
            deadline = time.monotonic() + 10
            while broker.transactions.loading and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            await scenario(broker)
        finally:
            await broker.close()

    asyncio.run(main())


@pytest.mark.parametrize("commit", [True, False])
def test_prepared_transaction_is_completed_at_start_up(tmp_path, commit):
    data_dir = tmp_path / "data"
    found: dict[str, object] = {}

    async def prepare(broker: Broker) -> None:
        await broker.create_topic("orders", 1, {})
        coordinator = broker.transactions
        error, pid, epoch = await coordinator.init_producer_id("tx", 10_000, -1, -1)
        assert error == ErrorCode.NONE
        assert await coordinator.add_partitions("tx", pid, epoch, {TP}) == ErrorCode.NONE
        batch = bytearray(build_batch([(None, b"v", (), T0)], producer_id=pid, producer_epoch=epoch,
                                      base_sequence=0, is_transactional=True))
        assert broker.storage.append("orders", 0, memoryview(batch), 9).error == ErrorCode.NONE
        assert broker.storage.last_stable_offset("orders", 0) == 0
        prepared = coordinator.transactions["tx"].copy()
        prepared.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        await coordinator.store.write(prepared)  # then "crash" before any marker
        found["pid"] = pid

    async def restart(broker: Broker) -> None:
        # the coordinator completed the transaction while loading: the marker is in
        # the log and the open transaction (from the producer snapshot) is closed
        storage = broker.storage
        assert storage.last_stable_offset("orders", 0, fetch_offset=0) == 2
        meta = broker.transactions.transactions["tx"]
        assert meta.state == (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)
        assert broker.storage.last_stable_offset("orders", 0) == 2  # data, then the marker
        aborted = broker.storage.aborted_transactions("orders", 0, 0, 2)
        assert aborted == ([] if commit else [(found["pid"], 0)])

    _run(data_dir, prepare)
    _run(data_dir, restart)


def test_compaction_never_lets_an_aborted_record_remove_a_committed_one(tmp_path):
    from kafkaproto.records import decode_batch
    from logserver.log.cleaner import compact
    from logserver.log.log import Log

    log = Log(tmp_path / "compacted-0")
    try:
        def append(batch: bytes | bytearray) -> None:
            data = bytearray(batch)
            log.append(data, parse_header(data))

        def txn(value: bytes, sequence: int, commit: bool) -> None:
            append(build_batch([(b"k", value, (), T0)], producer_id=5, producer_epoch=0,
                               base_sequence=sequence, is_transactional=True))
            append(build_batch([(b"other", b"x", (), T0)]))
            append(build_marker(5, 0, commit=commit, coordinator_epoch=0, timestamp_ms=T0))

        txn(b"committed", 0, True)
        txn(b"aborted", 1, False)
        log.roll()
        append(build_batch([(b"other", b"y", (), T0)]))  # supersedes the plain "other"
        compact(log, delete_retention_ms=0, now_ms=T0 + 1)
        values = []
        region = log.read(0, 1 << 20)
        assert region is not None
        with region:
            blob = region.read()
        pos = 0
        while pos < len(blob):
            header, records = decode_batch(blob, pos, verify_crc=False)
            if not header.is_control:
                values.extend(r.value for r in records)
            pos += header.size
        assert b"committed" in values  # not superseded by the aborted record of the same key
        assert values.count(b"x") == 0  # the plain records were compacted as before
    finally:
        log.close()


def test_transactional_id_expiry_only_when_nothing_is_open():
    m = machine()
    meta = init(m, None)  # Empty, last update T0
    assert not m.id_expired(meta, T0 + 1000, 1000)
    assert m.id_expired(meta, T0 + 1001, 1000)
    ongoing = m.add_partitions(meta, 7, 0, {TP}, T0).complete
    assert ongoing is not None
    assert not m.id_expired(ongoing, T0 + 10**9, 1000)  # the timeout aborts it first
