"""Transaction coordinator epochs in a cluster (3 real brokers on real etcd,
confluent-kafka): a coordinator stamps its markers with the leader epoch of the
transactional id's ``__transaction_state`` partition; after it is paused (SIGSTOP, a
zombie) and another broker takes the partition over, that broker's markers carry the
higher epoch and the data partition's leader refuses the old one's
(TRANSACTION_COORDINATOR_FENCED) without writing anything.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from helpers.cluster_txn import (
    PARTITIONS,
    TXN_PARTITIONS,
    TXN_STATE,
    create_txn_topic,
    read_committed,
    txn_coordinator,
    txn_coordinator_or_none,
    txn_producer,
)
from helpers.clusterprocs import Cluster
from helpers.kafkaclient import BlockingClient
from helpers.waiting import wait_until

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import (
    DescribeProducersRequest,
    ListOffsetsRequest,
    MetadataRequest,
    WriteTxnMarkersRequest,
)
from logserver.groups.store import kafka_partition_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _client(cluster: Cluster, node: int) -> BlockingClient:
    return BlockingClient(cluster.brokers[node].port, "txn-fencing", timeout=10)


def _state_leader(cluster: Cluster, node: int, index: int) -> tuple[int, int]:
    """(leader, leader epoch) of __transaction_state-``index`` as broker ``node`` tells."""
    client = _client(cluster, node)
    try:
        answer = client.call(ApiKey.METADATA, 9, MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=TXN_STATE)],
            allow_auto_topic_creation=False))
    finally:
        client.close()
    part = next(p for p in answer.topics[0].partitions if p.partition_index == index)
    return part.leader_id, part.leader_epoch


def _producers(cluster: Cluster, leader: int, topic: str, partition: int) -> dict[int, tuple[int, int]]:
    """Producer id -> (producer epoch, coordinator epoch of its last marker)."""
    client = _client(cluster, leader)
    try:
        answer = client.call(ApiKey.DESCRIBE_PRODUCERS, 0, DescribeProducersRequest(topics=[
            DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[partition])]))
    finally:
        client.close()
    part = answer.topics[0].partitions[0]
    assert part.error_code == ErrorCode.NONE
    return {p.producer_id: (p.producer_epoch, p.coordinator_epoch) for p in part.active_producers}


def _log_end(cluster: Cluster, leader: int, topic: str, partition: int) -> int:
    client = _client(cluster, leader)
    try:
        answer = client.call(ApiKey.LIST_OFFSETS, 4, ListOffsetsRequest(
            replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
                name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=partition, current_leader_epoch=-1, timestamp=-1)])]))
    finally:
        client.close()
    part = answer.topics[0].partitions[0]
    assert part.error_code == ErrorCode.NONE
    return int(part.offset)


def _commit(producer: Producer, topic: str, partition: int, values: list[bytes]) -> None:
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value=value, partition=partition)
    producer.commit_transaction(60)


def test_a_new_coordinator_stamps_a_higher_epoch_and_the_old_one_is_fenced(cluster):
    topic, txn_id = "txn-fencing", "fencing"
    create_txn_topic(cluster, topic)
    index = kafka_partition_for(txn_id, TXN_PARTITIONS)
    producer = txn_producer(cluster, txn_id)  # __transaction_state exists from here on
    old = txn_coordinator(cluster, txn_id)
    # a data partition led elsewhere, so its leader stays while the coordinator is paused
    data = next(p for p in range(PARTITIONS) if cluster.partition(topic, p).leader != old)
    leader = cluster.partition(topic, data).leader
    leader_then, old_epoch = _state_leader(cluster, leader, index)
    assert leader_then == old

    first = [b"first-%d" % i for i in range(10)]
    _commit(producer, topic, data, first)
    ((pid, (epoch, coordinator_epoch)),) = _producers(cluster, leader, topic, data).items()
    assert coordinator_epoch == old_epoch

    cluster.pause(old)  # a zombie: alive, holding its state, but no longer heard from
    try:
        wait_until(lambda: txn_coordinator_or_none(cluster, txn_id) not in (None, old), 30,
                   "a new transaction coordinator")
        # as the data partition's leader sees it: its view may trail the one answered above
        new, new_epoch = wait_until(lambda: (s := _state_leader(cluster, leader, index))[0]
                                    != old and s, 30, f"broker {leader} to see the new coordinator")
        assert new != old and new_epoch > old_epoch
        second = [b"second-%d" % i for i in range(10)]
        _commit(txn_producer(cluster, txn_id), topic, data, second)  # fences the first producer
        ((again, (epoch, coordinator_epoch)),) = _producers(cluster, leader, topic, data).items()
        assert (again, coordinator_epoch) == (pid, new_epoch)

        # the zombie's markers, even for the producer's current epoch: refused, nothing written
        end = _log_end(cluster, leader, topic, data)
        client = _client(cluster, leader)
        try:
            for commit in (True, False):
                answer = client.call(ApiKey.WRITE_TXN_MARKERS, 1, WriteTxnMarkersRequest(markers=[
                    WriteTxnMarkersRequest.WritableTxnMarker(
                        producer_id=pid, producer_epoch=epoch, transaction_result=commit,
                        coordinator_epoch=old_epoch, topics=[
                            WriteTxnMarkersRequest.WritableTxnMarkerTopic(
                                name=topic, partition_indexes=[data])])]))
                error = answer.markers[0].topics[0].partitions[0].error_code
                assert error == ErrorCode.TRANSACTION_COORDINATOR_FENCED
        finally:
            client.close()
        assert _log_end(cluster, leader, topic, data) == end
    finally:
        cluster.resume(old)
    assert sorted(read_committed(cluster.bootstrap, topic)) == sorted(first + second)
