"""Transactions survive the death of their coordinator (3 real brokers on real etcd,
confluent-kafka): ``__transaction_state`` is a replicated topic, so the broker that
becomes leader of a transactional id's partition loads its open or prepared transaction
and finishes it. read_committed consumers then see every committed record exactly once
and no aborted one.
"""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from helpers.cluster_txn import (
    PARTITIONS,
    TXN_PARTITIONS,
    TXN_STATE,
    create_txn_topic,
    read_committed,
    txn_coordinator,
    txn_coordinator_or_none,
    txn_producer,
    watermarks_or_none,
)
from helpers.clusterprocs import Cluster, running_cluster
from helpers.kafkaclient import BlockingClient
from helpers.waiting import wait_until

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import DescribeTransactionsRequest, FindCoordinatorRequest
from logserver.groups.store import kafka_partition_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _send(producer: Producer, topic: str, values: list[bytes]) -> None:
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % PARTITIONS)
    assert producer.flush(60) == 0


def test_coordinator_killed_mid_transaction_the_producer_commits_on_the_new_one(cluster):
    topic, txn_id = "txn-failover", "failover-mid"
    create_txn_topic(cluster, topic)
    producer = txn_producer(cluster, txn_id)
    # Kafka's layout: 50 partitions, 3 replicas each, leaders spread over the brokers.
    state_topic = cluster.metadata().topics[TXN_STATE]
    assert len(state_topic.partitions) == TXN_PARTITIONS
    assert {len(p.replicas) for p in state_topic.partitions.values()} == {3}
    assert {p.leader for p in state_topic.partitions.values()} == {1, 2, 3}
    producer.begin_transaction()
    _send(producer, topic, [b"aborted-%d" % i for i in range(20)])
    producer.abort_transaction(60)

    producer.begin_transaction()
    first = [b"first-%d" % i for i in range(30)]
    _send(producer, topic, first)
    victim = txn_coordinator(cluster, txn_id)
    cluster.brokers[victim].kill9()
    # The id's partition has a new leader that loaded the open transaction.
    wait_until(lambda: txn_coordinator_or_none(cluster, txn_id) not in (None, victim), 30,
               "a new transaction coordinator")
    _check_coordinators(cluster, txn_id, victim)
    second = [b"second-%d" % i for i in range(30)]
    _send(producer, topic, second)
    producer.commit_transaction(60)

    seen = read_committed(cluster.bootstrap, topic)
    assert sorted(seen) == sorted(first + second)  # each once, none of the aborted ones


def _check_coordinators(cluster: Cluster, txn_id: str, victim: int) -> None:
    """FindCoordinator names the new leader of the id's partition, which describes the
    open transaction it loaded; the other live broker answers NOT_COORDINATOR."""
    leader = txn_coordinator_or_none(cluster, txn_id)
    other = next(n for n in cluster.brokers if n not in (leader, victim))

    def ask(node: int) -> tuple[int, int, str]:
        """(coordinator named by FindCoordinator, DescribeTransactions error, state)."""
        client = BlockingClient(cluster.brokers[node].port, "txn-failover", timeout=10)
        try:
            found = client.call(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(
                key=txn_id, key_type=1))
            state = client.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsRequest(
                transactional_ids=[txn_id])).transaction_states[0]
            return found.node_id, state.error_code, state.transaction_state
        finally:
            client.close()

    wait_until(lambda: ask(leader) == (leader, ErrorCode.NONE, "Ongoing"), 30,
               "the new coordinator to describe the open transaction")
    wait_until(lambda: ask(other)[:2] == (leader, ErrorCode.NOT_COORDINATOR), 30,
               "the other broker to name the new coordinator and refuse the id")


def test_coordinator_killed_after_the_commit_request_the_transaction_completes(cluster):
    """The coordinator dies while the commit is under way. Whatever it had written, the
    outcome is atomic: a successful commit shows every record once; a producer with the
    same transactional id (fencing the old one) then finds the id free, and its own
    transaction commits on the new coordinator."""
    topic, txn_id = "txn-failover-commit", "failover-commit"
    create_txn_topic(cluster, topic)
    producer = txn_producer(cluster, txn_id)
    producer.begin_transaction()
    values = [b"commit-%d" % i for i in range(60)]
    _send(producer, topic, values)
    victim = txn_coordinator(cluster, txn_id)
    outcome: list[BaseException | None] = []

    def commit() -> None:
        try:
            producer.commit_transaction(60)
            outcome.append(None)
        except KafkaException as exc:
            outcome.append(exc)

    committer = threading.Thread(target=commit)
    committer.start()
    cluster.brokers[victim].kill9()
    committer.join(90)
    assert not committer.is_alive(), "commit_transaction never returned"

    newer = txn_producer(cluster, txn_id)  # fences the old producer; waits for completion
    newer.begin_transaction()
    later = [b"later-%d" % i for i in range(10)]
    _send(newer, topic, later)
    newer.commit_transaction(60)

    seen = read_committed(cluster.bootstrap, topic)
    assert len(seen) == len(set(seen))  # exactly once
    assert set(later) <= set(seen)
    first = [v for v in seen if v.startswith(b"commit-")]
    assert sorted(first) in (sorted(values), [])  # atomic
    if outcome == [None]:  # acknowledged: it must be there
        assert sorted(first) == sorted(values)


def test_a_prepared_commit_is_completed_by_the_new_coordinator(cluster):
    """Deterministically the PREPARE_COMMIT case: the data partition's leader is paused
    so the markers cannot be written, the coordinator is killed once its prepare record
    is replicated, and the new coordinator (the leader of the id's partition now) finds
    the transaction prepared and writes the markers itself. The producer's commit
    succeeds and every record is read once."""
    topic, txn_id = "txn-prepared", "failover-prepared"
    create_txn_topic(cluster, topic)
    producer = txn_producer(cluster, txn_id)
    coordinator = txn_coordinator(cluster, txn_id)
    index = kafka_partition_for(txn_id, TXN_PARTITIONS)
    data = next(p for p in range(PARTITIONS) if cluster.partition(topic, p).leader != coordinator)
    paused = cluster.partition(topic, data).leader
    producer.begin_transaction()
    values = [b"prepared-%d" % i for i in range(20)]
    for value in values:
        producer.produce(topic, value=value, partition=data)
    assert producer.flush(60) == 0
    before = wait_until(lambda: watermarks_or_none(cluster.bootstrap, TXN_STATE, [index]), 30,
                        f"the end of {TXN_STATE}-{index}")[index]
    outcome: list[BaseException | None] = []

    def commit() -> None:
        try:
            producer.commit_transaction(120)
            outcome.append(None)
        except KafkaException as exc:
            outcome.append(exc)

    cluster.pause(paused)
    committer = threading.Thread(target=commit)
    try:
        committer.start()
        # PREPARE_COMMIT is in the replicated log (the paused broker leaves the ISR).
        wait_until(lambda: (ends := watermarks_or_none(cluster.bootstrap, TXN_STATE, [index])) is not None
                   and ends[index] > before, 30, "the prepare record")
        cluster.brokers[coordinator].kill9()
        wait_until(lambda: txn_coordinator_or_none(cluster, txn_id) not in (None, coordinator,
                                                                         paused), 30,
                   "a new transaction coordinator")
    finally:
        cluster.resume(paused)
    committer.join(150)
    assert not committer.is_alive(), "commit_transaction never returned"
    assert outcome == [None]
    seen = read_committed(cluster.bootstrap, topic)
    assert sorted(seen) == sorted(values)


def test_an_abandoned_transaction_is_aborted_by_the_new_coordinator(tmp_path):
    """The coordinator dies and the producer never comes back: the new coordinator loaded
    the ongoing transaction and aborts it once it outlives transaction.timeout.ms, so
    read_committed consumers move past it and never see its records."""
    with running_cluster(tmp_path, 3, **{
            "min.insync.replicas": 2, "default.replication.factor": 3,
            "replica.lag.time.max.ms": 5000,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500}) as cluster:
        topic, txn_id = "txn-abandoned", "failover-abandoned"
        create_txn_topic(cluster, topic)
        abandoned = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id,
                              "linger.ms": 5, "transaction.timeout.ms": 5000,
                              "message.timeout.ms": 5000})
        abandoned.init_transactions(60)
        abandoned.begin_transaction()
        _send(abandoned, topic, [b"abandoned-%d" % i for i in range(30)])
        victim = txn_coordinator(cluster, txn_id)
        cluster.brokers[victim].kill9()
        committed = [b"committed-%d" % i for i in range(30)]
        other = txn_producer(cluster, "failover-other")
        other.begin_transaction()
        _send(other, topic, committed)
        other.commit_transaction(60)
        # Blocks at the abandoned transaction's first offset until it is aborted.
        seen = read_committed(cluster.bootstrap, topic)
        assert sorted(seen) == sorted(committed)


def test_coordinators_without_a_replica_of_the_topic_take_it_into_a_transaction(cluster):
    """A one-partition topic with two replicas; a transactional id and a group whose
    coordinators are on the third broker: AddPartitionsToTxn and TxnOffsetCommit know the
    topic from the cluster, so the transaction commits its record and the group's offset."""
    topic = "txn-two-replicas"
    admin = cluster.admin()  # kept: a collected admin client fails its futures
    admin.create_topics([NewTopic(topic, 1, 2)])[topic].result(timeout=20)
    led = wait_until(lambda: (p := cluster.partition(topic, 0)) is not None
                     and len(p.isrs) == 2 and p, 30, f"{topic} in sync")
    [elsewhere] = set(cluster.brokers) - set(led.replicas)
    probe = txn_producer(cluster, "probe")  # creates __transaction_state
    probe.flush(5)
    txn_id = next(t for t in (f"txn-elsewhere-{i}" for i in range(200))
                  if txn_coordinator(cluster, t) == elsewhere)
    starter = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "starter"})
    try:  # creates __consumer_offsets
        wait_until(lambda: _committed_or_none(starter, topic) is not None, 60,
                   "a group coordinator")
    finally:
        starter.close()
    group = wait_until(lambda: next((
        g for g in (f"group-elsewhere-{i}" for i in range(200))
        if (p := cluster.partition("__consumer_offsets", kafka_partition_for(g, 50)))
        is not None and p.leader == elsewhere), None), 30, "a group coordinated elsewhere")

    producer = txn_producer(cluster, txn_id)
    producer.begin_transaction()
    producer.produce(topic, value=b"in a transaction", partition=0)
    assert producer.flush(30) == 0
    meta = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    try:
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, 1)],
                                             meta.consumer_group_metadata(), 30)
    finally:
        meta.close()
    producer.commit_transaction(30)

    reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                       "isolation.level": "read_committed"})
    try:
        [committed] = reader.committed([TopicPartition(topic, 0)], timeout=10)
    finally:
        reader.close()
    assert committed.offset == 1, committed


def _committed_or_none(consumer: Consumer, topic: str) -> list | None:
    try:
        return consumer.committed([TopicPartition(topic, 0)], timeout=5)
    except KafkaException:
        return None
