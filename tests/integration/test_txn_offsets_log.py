"""A TxnOffsetCommit's offsets in the log, on one node (a real server, confluent-kafka):
as in Kafka, they are in ``__consumer_offsets`` as a transactional batch of the producer
from the moment they are sent (DescribeProducers shows its open transaction there), and
the transaction's marker in that partition decides them. Across a kill -9 the group
coordinator replays the batch: still pending while the transaction is open, dropped when
a new producer with the transactional id aborts it, committed with the commit marker.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from helpers.kafkaclient import BlockingClient

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import DescribeProducersRequest, OffsetFetchRequest

pytestmark = pytest.mark.timeout(180)

OFFSETS = "__consumer_offsets"


def _create(server, *topics: str) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
        future.result(10)


def _producer(server, txn_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": txn_id,
                         "linger.ms": 5})
    producer.init_transactions(30)
    return producer


def _committed(server, group: str, topic: str, *, require_stable: bool) -> tuple[int, int]:
    client = BlockingClient(server.port, "txn-offsets-log", timeout=10)
    try:
        response = client.call(ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(
            group_id=group, require_stable=require_stable, topics=[
                OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]))
    finally:
        client.close()
    partition = response.topics[0].partitions[0]
    return partition.committed_offset, partition.error_code


def _open_in_offsets_topic(server) -> dict[int, int]:
    """Producer id -> start offset of its open transaction in ``__consumer_offsets``-0
    (the only partition of a single node's offsets topic)."""
    client = BlockingClient(server.port, "txn-offsets-log", timeout=10)
    try:
        answer = client.call(ApiKey.DESCRIBE_PRODUCERS, 0, DescribeProducersRequest(topics=[
            DescribeProducersRequest.TopicRequest(name=OFFSETS, partition_indexes=[0])]))
    finally:
        client.close()
    part = answer.topics[0].partitions[0]
    assert part.error_code == ErrorCode.NONE
    return {p.producer_id: p.current_txn_start_offset for p in part.active_producers
            if p.current_txn_start_offset >= 0}


def _send_offsets(server, producer: Producer, group: str, source: str, sink: str,
                  offset: int) -> None:
    producer.begin_transaction()
    producer.produce(sink, value=b"x")
    member = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group})
    try:
        producer.send_offsets_to_transaction([TopicPartition(source, 0, offset)],
                                             member.consumer_group_metadata(), 30)
    finally:
        member.close()


def test_an_open_transactions_offsets_survive_kill9_pending_then_aborted(server, topic_name):
    source, sink, group = f"{topic_name}-in", f"{topic_name}-out", f"g-{topic_name}"
    _create(server, source, sink)
    producer = _producer(server, f"tx-{topic_name}")
    _send_offsets(server, producer, group, source, sink, 3)
    producer.commit_transaction(30)
    _send_offsets(server, producer, group, source, sink, 8)
    assert len(_open_in_offsets_topic(server)) == 1  # the batch of the open transaction
    assert _committed(server, group, source, require_stable=True) == (
        -1, ErrorCode.UNSTABLE_OFFSET_COMMIT)

    server.kill9()
    server.start()
    # replayed: the offsets still wait for the transaction's marker
    assert len(_open_in_offsets_topic(server)) == 1
    assert _committed(server, group, source, require_stable=True) == (
        -1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    assert _committed(server, group, source, require_stable=False) == (3, ErrorCode.NONE)
    # a new incarnation of the producer aborts the transaction, and drops its offsets
    _producer(server, f"tx-{topic_name}")
    assert _open_in_offsets_topic(server) == {}
    assert _committed(server, group, source, require_stable=True) == (3, ErrorCode.NONE)


def test_a_committed_transactions_offsets_are_replayed_after_kill9(server, topic_name):
    source, sink, group = f"{topic_name}-in", f"{topic_name}-out", f"g-{topic_name}"
    _create(server, source, sink)
    producer = _producer(server, f"tx-{topic_name}")
    _send_offsets(server, producer, group, source, sink, 4)
    assert len(_open_in_offsets_topic(server)) == 1
    producer.commit_transaction(30)
    assert _open_in_offsets_topic(server) == {}  # the commit marker closed it

    server.kill9()
    server.start()
    assert _committed(server, group, source, require_stable=True) == (4, ErrorCode.NONE)
