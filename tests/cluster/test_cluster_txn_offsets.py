"""sendOffsetsToTransaction when the group's coordinator and the transaction's are two
different brokers (3 real brokers on real etcd, confluent-kafka's transactional producer).

The group coordinator holds the TxnOffsetCommit offsets, written to the group's
``__consumer_offsets`` partition as a transactional batch, until the transaction's
marker reaches that partition: commit makes them the group's offsets, abort drops them,
and OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT meanwhile. A new group
coordinator (kill -9 of the old one) replays the batch and its marker, or gets the marker
from the transaction coordinator; a new transaction coordinator (kill -9 of the old one
between its prepare record and the markers) writes the marker itself. Either way a
committed transaction's offsets are at the group's coordinator.

The transactional id and the group are chosen so that their coordinators differ: with
Kafka's placement (``Utils.abs(key.hashCode) % 50`` of the internal topics) and the
leaders of those partitions from Metadata; FindCoordinator is checked to name them.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from helpers.cluster_txn import watermarks_or_none
from helpers.clusterprocs import Cluster
from helpers.kafkaclient import BlockingClient
from helpers.waiting import wait_until

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import FindCoordinatorRequest, OffsetFetchRequest
from logserver.groups.store import kafka_partition_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

OFFSETS = "__consumer_offsets"
TXN_STATE = "__transaction_state"
INTERNAL_PARTITIONS = 50  # Kafka's offsets.topic.num.partitions, transaction.state.log.num.partitions
SOURCE, OUTPUT = "consumed", "produced"
PARTITIONS = 3
CONSUMED = TopicPartition(SOURCE, 1)


def _leaders_in_sync(cluster: Cluster, internal: str) -> dict[int, int]:
    """Partition -> leader of ``internal``'s partitions whose 3 replicas are in sync."""
    topic = cluster.metadata().topics.get(internal)
    if topic is None or topic.error is not None:
        return {}
    return {i: p.leader for i, p in topic.partitions.items() if len(p.isrs) == 3 and p.leader > 0}


def _keys(prefix: str, internal: str, leaders: dict[int, int], wanted: Any) -> str | None:
    return next((key for key in (f"{prefix}-{i}" for i in range(500))
                 if wanted(leaders.get(kafka_partition_for(key, INTERNAL_PARTITIONS)))), None)


def _find_coordinator(cluster: Cluster, key: str, key_type: int) -> int:
    client = BlockingClient(cluster.brokers[1].port, "txn-offsets", timeout=10)
    try:
        answer = client.call(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(
            key=key, key_type=key_type))
        return -1 if answer.error_code != ErrorCode.NONE else int(answer.node_id)
    finally:
        client.close()


def _apart(cluster: Cluster) -> tuple[str, int, str, int]:
    """(transactional id, its coordinator, group, its coordinator): two brokers, each
    the leader of the internal partition, with every replica in sync."""
    admin = cluster.admin()
    for topic in (SOURCE, OUTPUT):
        admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(timeout=20)
    probe = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "probe"})
    probe.init_transactions(60)  # creates __transaction_state
    starter = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "starter"})
    try:  # creates __consumer_offsets
        wait_until(lambda: _committed_or_none(starter) is not None, 60, "a group coordinator")
    finally:
        starter.close()
    txn_leaders = wait_until(lambda: _leaders_in_sync(cluster, TXN_STATE), 60, TXN_STATE)
    txn_id = _keys("txn-apart", TXN_STATE, txn_leaders, lambda leader: leader is not None)
    assert txn_id is not None
    txn_coordinator = txn_leaders[kafka_partition_for(txn_id, INTERNAL_PARTITIONS)]
    group = wait_until(lambda: _keys("group-apart", OFFSETS, _leaders_in_sync(cluster, OFFSETS),
                                     lambda leader: leader not in (None, txn_coordinator)),
                       60, "a group coordinated by another broker")
    group_coordinator = _leader(cluster, OFFSETS, group)
    assert group_coordinator not in (None, txn_coordinator)
    # what the clients are told, and so where they send their requests
    wait_until(lambda: _find_coordinator(cluster, txn_id, 1) == txn_coordinator, 30,
               "FindCoordinator to name the transaction coordinator")
    wait_until(lambda: _find_coordinator(cluster, group, 0) == group_coordinator, 30,
               "FindCoordinator to name the group coordinator")
    return txn_id, txn_coordinator, group, int(group_coordinator)


def _leader(cluster: Cluster, internal: str, key: str) -> int | None:
    part = cluster.partition(internal, kafka_partition_for(key, INTERNAL_PARTITIONS))
    return None if part is None or part.leader < 0 else int(part.leader)


def _committed_or_none(consumer: Consumer) -> list | None:
    try:
        return consumer.committed([CONSUMED], timeout=5)
    except KafkaException:
        return None


def _offset_fetch(cluster: Cluster, node: int, group: str, *,
                  require_stable: bool) -> tuple[int, int]:
    """(committed offset, error) of CONSUMED in ``group``, asked of broker ``node``
    (OffsetFetch v7, require_stable as KIP-447's consumers send it)."""
    client = BlockingClient(cluster.brokers[node].port, "txn-offsets", timeout=10)
    try:
        answer = client.call(ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(
            group_id=group, require_stable=require_stable,
            topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
                name=CONSUMED.topic, partition_indexes=[CONSUMED.partition])]))
    finally:
        client.close()
    if answer.error_code != ErrorCode.NONE:
        return -1, int(answer.error_code)
    [row] = answer.topics[0].partitions
    return int(row.committed_offset), int(row.error_code)


def _at_the_coordinator(cluster: Cluster, group: str) -> tuple[int, int] | None:
    """The stable committed offset, asked of whichever broker leads the group's
    partition now; None while there is none, it is still loading, or the offsets still
    wait for their marker."""
    node = _leader(cluster, OFFSETS, group)
    if node is None or not cluster.brokers[node].running:
        return None
    try:
        found = _offset_fetch(cluster, node, group, require_stable=True)
    except OSError:
        return None
    return None if found[1] in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                ErrorCode.UNSTABLE_OFFSET_COMMIT) else found


def _producer(cluster: Cluster, txn_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id,
                         "linger.ms": 5, "transaction.timeout.ms": 60000})
    producer.init_transactions(60)
    return producer


def _transaction(cluster: Cluster, producer: Producer, group: str, offset: int) -> None:
    """Begin, produce one record, send CONSUMED's ``offset`` for ``group``."""
    producer.begin_transaction()
    producer.produce(OUTPUT, value=b"at %d" % offset, partition=0)
    assert producer.flush(30) == 0
    member = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    try:
        producer.send_offsets_to_transaction([TopicPartition(SOURCE, CONSUMED.partition, offset)],
                                             member.consumer_group_metadata(), 30)
    finally:
        member.close()


def test_commit_and_abort_with_the_group_coordinated_by_another_broker(cluster):
    txn_id, _, group, coordinator = _apart(cluster)
    producer = _producer(cluster, txn_id)

    _transaction(cluster, producer, group, 5)
    # pending at the group coordinator: unstable for KIP-447 fetches, invisible to others
    assert _offset_fetch(cluster, coordinator, group, require_stable=True) == (
        -1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    assert _offset_fetch(cluster, coordinator, group, require_stable=False) == (-1, ErrorCode.NONE)
    producer.commit_transaction(30)
    assert _offset_fetch(cluster, coordinator, group, require_stable=True) == (5, ErrorCode.NONE)

    _transaction(cluster, producer, group, 9)
    assert _offset_fetch(cluster, coordinator, group, require_stable=True) == (
        -1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    producer.abort_transaction(30)
    assert _offset_fetch(cluster, coordinator, group, require_stable=True) == (5, ErrorCode.NONE)

    # and what a read_committed consumer of the group is told
    reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                       "isolation.level": "read_committed"})
    try:
        [committed] = reader.committed([CONSUMED], timeout=20)
    finally:
        reader.close()
    assert committed.offset == 5, committed


@pytest.mark.parametrize("kill", ["before the markers", "after the commit"])
def test_the_group_coordinator_killed_the_new_one_has_the_committed_offsets(cluster, kill):
    """kill -9 of the group coordinator once the offsets are held: before EndTxn (the
    new leader of the group's partition replays the transactional batch and gets the
    marker from the transaction coordinator) or after it (it replays the batch and
    the marker)."""
    txn_id, txn_coordinator, group, victim = _apart(cluster)
    producer = _producer(cluster, txn_id)
    _transaction(cluster, producer, group, 11)
    if kill == "before the markers":
        cluster.brokers[victim].kill9()
        producer.commit_transaction(120)
    else:
        producer.commit_transaction(30)
        assert _offset_fetch(cluster, victim, group, require_stable=True) == (11, ErrorCode.NONE)
        cluster.brokers[victim].kill9()
    wait_until(lambda: _leader(cluster, OFFSETS, group) not in (None, victim), 60,
               "a new group coordinator")
    assert wait_until(lambda: _at_the_coordinator(cluster, group), 60,
                      "the new group coordinator to answer") == (11, ErrorCode.NONE)
    assert _leader(cluster, TXN_STATE, txn_id) == txn_coordinator  # only the group's moved


def test_the_transaction_coordinator_killed_after_prepare_the_offsets_are_committed(cluster):
    """The group coordinator is paused so the marker cannot reach the offsets partition,
    the transaction coordinator is killed once its prepare record is replicated: the
    new transaction coordinator completes the transaction, and the group's coordinator
    then has its offsets."""
    txn_id, txn_coordinator, group, paused = _apart(cluster)
    producer = _producer(cluster, txn_id)
    index = kafka_partition_for(txn_id, INTERNAL_PARTITIONS)
    _transaction(cluster, producer, group, 17)
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
        wait_until(lambda: (ends := watermarks_or_none(cluster.bootstrap, TXN_STATE, [index])) is not None
                   and ends[index] > before, 30, "the prepare record")
        cluster.brokers[txn_coordinator].kill9()
        wait_until(lambda: _leader(cluster, TXN_STATE, txn_id) not in (None, txn_coordinator),
                   30, "a new transaction coordinator")
    finally:
        cluster.resume(paused)
    committer.join(150)
    assert not committer.is_alive(), "commit_transaction never returned"
    assert outcome == [None]
    assert wait_until(lambda: _at_the_coordinator(cluster, group), 60,
                      "the group coordinator to answer") == (17, ErrorCode.NONE)
