"""A data directory whose ``__transaction_state`` was written before the topic was
replicated (a broker that coordinated transactions alone: one local partition, Kafka's
placement not applied), started as a cluster broker on real etcd: with an open
transaction the start is refused with one line naming it and what to do; without one
the old copy is moved aside, the replicated topic replaces it, and transactions work.
The old layout is made by running the same directory as a single node first (which
writes ``__transaction_state`` exactly as cluster brokers did before issue 12)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from helpers.serverproc import ServerProcess
from helpers.waiting import wait_until

from logserver.cluster.txn_state_migration import MOVED_DIR
from logserver.internal_topics import TXN_STATE_TOPIC as TXN_STATE
from logserver.internal_topics import kafka_partition_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

TXN_ID = "before-replication"
TOPIC = "old-txns"


def _transaction(bootstrap: str, topic: str, *, commit: bool) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": TXN_ID,
                         "transaction.timeout.ms": 600_000, "linger.ms": 0})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"v")
    assert producer.flush(30) == 0
    if commit:
        producer.commit_transaction(30)


def _old_layout(data: Path, tmp_path: Path, *, commit: bool) -> None:
    single = ServerProcess(data, settings={"node.id": 1}, log_path=tmp_path / "single.log")
    single.start()
    try:
        admin = AdminClient({"bootstrap.servers": single.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(timeout=20)
        _transaction(single.bootstrap, TOPIC, commit=commit)
    finally:
        assert single.stop() == 0
    assert sorted(p.name for p in data.glob("__transaction_state-*")) == ["__transaction_state-0"]


def _broker(data: Path, tmp_path: Path, etcd) -> ServerProcess:
    return ServerProcess(data, log_path=tmp_path / "broker.log", settings={
        "node.id": 1, "cluster.etcd.endpoints": etcd.address,
        "cluster.etcd.prefix": f"/test-{tmp_path.name}", "broker.session.timeout.ms": 3000,
        "default.replication.factor": 1, "min.insync.replicas": 1})


def test_open_transactions_refuse_the_start(tmp_path, etcd):
    data = tmp_path / "node1"
    _old_layout(data, tmp_path, commit=False)
    broker = _broker(data, tmp_path, etcd)
    try:
        broker.start(wait=False)
        assert broker.proc is not None
        assert broker.proc.wait(timeout=60) == 1  # EXIT_CANNOT_START
        lines = [line for line in broker.output().splitlines() if "refusing to start" in line]
        assert len(lines) == 1, broker.output_tail()
        assert "written before __transaction_state was replicated" in lines[0]
        assert f"1 open transaction(s) ({TXN_ID})" in lines[0]
        assert "start this data directory with the previous version" in lines[0]
        assert "kafka-transactions.sh abort" in lines[0]
    finally:
        broker.stop()
    assert (data / "__transaction_state-0").is_dir()  # left as it was
    assert not (data / MOVED_DIR).exists()


def test_without_open_transactions_the_old_copy_is_moved_aside(tmp_path, etcd):
    data = tmp_path / "node1"
    _old_layout(data, tmp_path, commit=True)
    broker = _broker(data, tmp_path, etcd)
    try:
        broker.start()  # its port opens once it has joined (it checks first)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        wait_until(lambda: admin.list_topics(timeout=10).controller_id == 1, 30, "the controller")
        moved = list((data / MOVED_DIR).glob("*/__transaction_state-0"))
        assert len(moved) == 1 and any(moved[0].glob("*.log"))
        admin.create_topics([NewTopic("new-txns", 1, 1)])["new-txns"].result(timeout=20)
        _transaction(broker.bootstrap, "new-txns", commit=True)  # the same id, new coordinator
        # the replicated topic, Kafka's layout: 50 partitions now, and the id's partition
        # (written by that transaction; the others are made by their first append) here
        wait_until(lambda: len(admin.list_topics(timeout=10).topics[TXN_STATE].partitions) == 50
                   and (data / f"{TXN_STATE}-{kafka_partition_for(TXN_ID, 50)}").is_dir(), 30,
                   "the replicated __transaction_state's local copy", ignore=(KeyError,))
        assert broker.restart() == 0  # a replica of the replicated topic: left alone
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        wait_until(lambda: admin.list_topics(timeout=10).controller_id == 1, 30, "the controller")
        _transaction(broker.bootstrap, "new-txns", commit=True)
    finally:
        broker.stop()
    warnings = [line for line in broker.output().splitlines()
                if "was written before it was replicated" in line]
    assert len(warnings) == 1, broker.output_tail()
    assert len(list((data / MOVED_DIR).iterdir())) == 1
