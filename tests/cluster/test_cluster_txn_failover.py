"""Transactions survive the death of their coordinator (3 real brokers on real etcd,
confluent-kafka): ``__transaction_state`` is a replicated topic, so the broker that
becomes leader of a transactional id's partition loads its open or prepared transaction
and finishes it. read_committed consumers then see every committed record exactly once
and no aborted one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from helpers.clusterprocs import Cluster, running_cluster
from helpers.kafkaclient import BlockingClient
from helpers.waiting import wait_until

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import DescribeTransactionsRequest, FindCoordinatorRequest
from logserver.groups.store import kafka_partition_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

TXN_STATE = "__transaction_state"
TXN_PARTITIONS = 50  # Kafka's transaction.state.log.num.partitions
PARTITIONS = 3


def _create(cluster: Cluster, topic: str) -> None:
    admin = cluster.admin()
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(timeout=20)
    wait_until(lambda: all((p := cluster.partition(topic, i)) is not None and len(p.isrs) == 3
                           for i in range(PARTITIONS)), 30, f"{topic} in sync")


def _coordinator(cluster: Cluster, txn_id: str) -> int:
    """The leader of the id's __transaction_state partition once its replicas are in sync
    (so killing it leaves a replica with the whole state)."""
    index = kafka_partition_for(txn_id, TXN_PARTITIONS)

    def in_sync() -> int | None:
        part = cluster.partition(TXN_STATE, index)
        return part.leader if part is not None and len(part.isrs) == 3 else None
    return int(wait_until(in_sync, 30, f"{TXN_STATE}-{index} in sync"))


def _producer(cluster: Cluster, txn_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id,
                         "linger.ms": 5, "transaction.timeout.ms": 60000})
    producer.init_transactions(60)
    return producer


def _watermarks(bootstrap: str, topic: str, partitions: Iterable[int]) -> dict[int, int] | None:
    """The partitions' high watermarks (a read_committed consumer would be told the last
    stable offset, which stops at an open transaction); None when the query fails. Right
    after a failover a broker may still name no leader for a partition (the dead or
    resumed broker's key is gone from etcd, the controller has not moved its leaderships
    yet), and librdkafka's watermark query fails at once on that ("Local: Unknown
    partition", seen with a just-resumed broker answering; or NOT_LEADER_FOR_PARTITION
    from a stale leader): callers poll with a fresh client each time."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "hw",
                         "isolation.level": "read_uncommitted"})
    try:
        return {p: int(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=20,
                                                      cached=False)[1])
                for p in partitions}
    except KafkaException:
        return None
    finally:
        consumer.close()


def _high_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    """Every partition's, once a failover has settled enough to answer (at most a minute)."""
    return wait_until(lambda: _watermarks(bootstrap, topic, range(PARTITIONS)), 60,
                      f"the high watermarks of {topic}")


def _read_committed(bootstrap: str, topic: str) -> list[bytes]:
    """Every record a read_committed consumer gets, up to each partition's high watermark:
    it gets there only once no transaction is open below it."""
    ends = _high_watermarks(bootstrap, topic)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while True:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
            positions = consumer.position([TopicPartition(topic, p) for p in range(PARTITIONS)])
            if all(tp.offset >= ends[tp.partition] or ends[tp.partition] == 0 for tp in positions):
                return values
            assert time.monotonic() < deadline, f"stuck at {positions}, ends {ends}"
    finally:
        consumer.close()


def _send(producer: Producer, topic: str, values: list[bytes]) -> None:
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % PARTITIONS)
    assert producer.flush(60) == 0


def test_coordinator_killed_mid_transaction_the_producer_commits_on_the_new_one(cluster):
    topic, txn_id = "txn-failover", "failover-mid"
    _create(cluster, topic)
    producer = _producer(cluster, txn_id)
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
    victim = _coordinator(cluster, txn_id)
    cluster.brokers[victim].kill9()
    # The id's partition has a new leader that loaded the open transaction.
    wait_until(lambda: _coordinator_or_none(cluster, txn_id) not in (None, victim), 30,
               "a new transaction coordinator")
    _check_coordinators(cluster, txn_id, victim)
    second = [b"second-%d" % i for i in range(30)]
    _send(producer, topic, second)
    producer.commit_transaction(60)

    seen = _read_committed(cluster.bootstrap, topic)
    assert sorted(seen) == sorted(first + second)  # each once, none of the aborted ones


def _check_coordinators(cluster: Cluster, txn_id: str, victim: int) -> None:
    """FindCoordinator names the new leader of the id's partition, which describes the
    open transaction it loaded; the other live broker answers NOT_COORDINATOR."""
    leader = _coordinator_or_none(cluster, txn_id)
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


def _coordinator_or_none(cluster: Cluster, txn_id: str) -> int | None:
    part = cluster.partition(TXN_STATE, kafka_partition_for(txn_id, TXN_PARTITIONS))
    return None if part is None or part.leader < 0 else int(part.leader)


def test_coordinator_killed_after_the_commit_request_the_transaction_completes(cluster):
    """The coordinator dies while the commit is under way. Whatever it had written, the
    outcome is atomic: a successful commit shows every record once; a producer with the
    same transactional id (fencing the old one) then finds the id free, and its own
    transaction commits on the new coordinator."""
    topic, txn_id = "txn-failover-commit", "failover-commit"
    _create(cluster, topic)
    producer = _producer(cluster, txn_id)
    producer.begin_transaction()
    values = [b"commit-%d" % i for i in range(60)]
    _send(producer, topic, values)
    victim = _coordinator(cluster, txn_id)
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

    newer = _producer(cluster, txn_id)  # fences the old producer; waits for completion
    newer.begin_transaction()
    later = [b"later-%d" % i for i in range(10)]
    _send(newer, topic, later)
    newer.commit_transaction(60)

    seen = _read_committed(cluster.bootstrap, topic)
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
    _create(cluster, topic)
    producer = _producer(cluster, txn_id)
    coordinator = _coordinator(cluster, txn_id)
    index = kafka_partition_for(txn_id, TXN_PARTITIONS)
    data = next(p for p in range(PARTITIONS) if cluster.partition(topic, p).leader != coordinator)
    paused = cluster.partition(topic, data).leader
    producer.begin_transaction()
    values = [b"prepared-%d" % i for i in range(20)]
    for value in values:
        producer.produce(topic, value=value, partition=data)
    assert producer.flush(60) == 0
    before = wait_until(lambda: _watermarks(cluster.bootstrap, TXN_STATE, [index]), 30,
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
        wait_until(lambda: (ends := _watermarks(cluster.bootstrap, TXN_STATE, [index])) is not None
                   and ends[index] > before, 30, "the prepare record")
        cluster.brokers[coordinator].kill9()
        wait_until(lambda: _coordinator_or_none(cluster, txn_id) not in (None, coordinator,
                                                                         paused), 30,
                   "a new transaction coordinator")
    finally:
        cluster.resume(paused)
    committer.join(150)
    assert not committer.is_alive(), "commit_transaction never returned"
    assert outcome == [None]
    seen = _read_committed(cluster.bootstrap, topic)
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
        _create(cluster, topic)
        abandoned = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id,
                              "linger.ms": 5, "transaction.timeout.ms": 5000,
                              "message.timeout.ms": 5000})
        abandoned.init_transactions(60)
        abandoned.begin_transaction()
        _send(abandoned, topic, [b"abandoned-%d" % i for i in range(30)])
        victim = _coordinator(cluster, txn_id)
        cluster.brokers[victim].kill9()
        committed = [b"committed-%d" % i for i in range(30)]
        other = _producer(cluster, "failover-other")
        other.begin_transaction()
        _send(other, topic, committed)
        other.commit_transaction(60)
        # Blocks at the abandoned transaction's first offset until it is aborted.
        seen = _read_committed(cluster.bootstrap, topic)
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
    probe = _producer(cluster, "probe")  # creates __transaction_state
    probe.flush(5)
    txn_id = next(t for t in (f"txn-elsewhere-{i}" for i in range(200))
                  if _coordinator(cluster, t) == elsewhere)
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

    producer = _producer(cluster, txn_id)
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
