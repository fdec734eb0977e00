"""OffsetForLeaderEpoch (API 23) and Fetch's LastFetchedEpoch on a single node, over the
wire (consumers validate their position with them, KIP-320).

One broker leads every partition at epoch 0: epoch 0 ends at the log end, a later epoch
is unknown (-1, -1), an unknown partition is UNKNOWN_TOPIC_OR_PARTITION. The failover
case, where an epoch ends below a consumer's position, is
tests/cluster/test_cluster_leader_epoch_validation.py."""

from __future__ import annotations

from helpers.clienthelpers import create_topic
from helpers.kafkaclient import BlockingClient
from kafka import KafkaProducer

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import (
    ApiVersionsRequest,
    FetchRequest,
    OffsetForLeaderEpochRequest,
)

Partition = OffsetForLeaderEpochRequest.OffsetForLeaderPartition


def _ask(port: int, version: int, topic: str, *wanted: tuple[int, int, int]) -> list[tuple]:
    """[(partition, error, epoch, end offset)] for (partition, current epoch, epoch) asked."""
    client = BlockingClient(port)
    try:
        answer = client.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, OffsetForLeaderEpochRequest(
            replica_id=-1, topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
                topic=topic, partitions=[Partition(partition=p, current_leader_epoch=current,
                                                   leader_epoch=epoch)
                                         for p, current, epoch in wanted])]))
    finally:
        client.close()
    [result] = answer.topics
    assert result.topic == topic
    return [(r.partition, r.error_code, r.leader_epoch, r.end_offset) for r in result.partitions]


def _produce(bootstrap: str, topic: str, partition: int, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    try:
        for i in range(count):
            producer.send(topic, value=b"v%d" % i, partition=partition).get(30)
    finally:
        producer.close()


def test_advertised_in_api_versions(module_server):
    client = BlockingClient(module_server.port)
    try:
        answer = client.call(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(
            client_software_name="tests", client_software_version="1"))
    finally:
        client.close()
    versions = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert versions[ApiKey.OFFSET_FOR_LEADER_EPOCH] == (2, 4)


def test_epoch_zero_ends_at_the_log_end_and_later_epochs_are_unknown(module_server, topic_name):
    create_topic(module_server.bootstrap, topic_name, partitions=2)
    _produce(module_server.bootstrap, topic_name, 0, 3)
    for version in (2, 3, 4):
        assert _ask(module_server.port, version, topic_name,
                    (0, 0, 0), (1, -1, 0), (0, -1, 1), (5, -1, 0)) == [
            (0, ErrorCode.NONE, 0, 3),  # the current epoch: the log end
            (1, ErrorCode.NONE, 0, 0),  # an empty partition
            (0, ErrorCode.NONE, -1, -1),  # an epoch this leader never had
            (5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
        ], version
    assert _ask(module_server.port, 4, topic_name + "-none", (0, -1, 0)) == [
        (0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]


def test_a_fetch_whose_last_epoch_is_unknown_here_is_out_of_range(module_server, topic_name):
    """Fetch v12+: LastFetchedEpoch 0 (ours) reads; an epoch this leader never had cannot
    be placed in the log, OFFSET_OUT_OF_RANGE as Kafka answers."""
    create_topic(module_server.bootstrap, topic_name, partitions=1)
    _produce(module_server.bootstrap, topic_name, 0, 2)

    def fetch(last_epoch: int):
        request = FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
            session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
            topics=[FetchRequest.FetchTopic(topic=topic_name, partitions=[
                FetchRequest.FetchPartition(partition=0, current_leader_epoch=0, fetch_offset=1,
                                            last_fetched_epoch=last_epoch, log_start_offset=-1,
                                            partition_max_bytes=1 << 20)])])
        client = BlockingClient(module_server.port)
        try:
            return client.call(ApiKey.FETCH, 12, request).responses[0].partitions[0]
        finally:
            client.close()

    read = fetch(0)
    assert read.error_code == ErrorCode.NONE and read.records
    assert read.diverging_epoch.end_offset == -1
    assert fetch(3).error_code == ErrorCode.OFFSET_OUT_OF_RANGE

