"""ListOffsets v8-v10 against a real server: earliest local (-4, KIP-405) is the log start
(everything is local here), latest tiered (-5, KIP-1005) is -1 as Kafka answers for a
topic without remote storage, v10 carries TimeoutMs (KIP-1075); with kafka-python's
admin client (which negotiates v10) and raw requests at the version edges."""

from __future__ import annotations

import pytest
from helpers.clienthelpers import ck_produce, kp_admin
from helpers.kafkaclient import BlockingClient

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import ListOffsetsRequest

pytestmark = pytest.mark.timeout(120)


def _list(client: BlockingClient, version: int, topic: str, *timestamps: int) -> list[tuple[int, int, int]]:
    response = client.call(ApiKey.LIST_OFFSETS, version, ListOffsetsRequest(
        replica_id=-1, isolation_level=0, timeout_ms=5000,
        topics=[ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=ts)
            for ts in timestamps])]))
    return [(p.error_code, p.offset, p.timestamp) for p in response.topics[0].partitions]


def test_kafka_python_earliest_local_and_latest_tiered(server, topic_name):
    from kafka import TopicPartition
    from kafka.admin import NewTopic, OffsetSpec

    bootstrap = server.bootstrap
    admin = kp_admin(bootstrap)
    try:
        admin.create_topics([NewTopic(topic_name, 1, 1)])
        ck_produce(bootstrap, topic_name, [{"value": b"v%d" % i, "partition": 0} for i in range(6)])
        tp = TopicPartition(topic_name, 0)
        admin.delete_records({tp: 2})
        found = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST_LOCAL})[tp]
        assert (found.offset, found.timestamp) == (2, -1)
        tiered = admin.list_partition_offsets({tp: OffsetSpec.LATEST_TIERED})[tp]
        assert tiered.offset == -1
        assert admin.list_partition_offsets({tp: OffsetSpec.LATEST})[tp].offset == 6
    finally:
        admin.close()


def test_version_edges_of_the_special_timestamps(server, topic_name):
    ck_produce(server.bootstrap, topic_name, [{"value": b"x", "partition": 0} for _ in range(3)])
    client = BlockingClient(server.port)
    try:
        assert _list(client, 10, topic_name, -4, -5, -2, -1) == [
            (ErrorCode.NONE, 0, -1), (ErrorCode.NONE, -1, -1), (ErrorCode.NONE, 0, -1),
            (ErrorCode.NONE, 3, -1)]
        assert _list(client, 9, topic_name, -5)[0] == (ErrorCode.NONE, -1, -1)
        assert _list(client, 8, topic_name, -4)[0] == (ErrorCode.NONE, 0, -1)
        # before their versions they are ordinary (invalid) negative timestamps
        assert _list(client, 8, topic_name, -5)[0][0] == ErrorCode.INVALID_REQUEST
        assert _list(client, 7, topic_name, -4)[0][0] == ErrorCode.INVALID_REQUEST
        missing = client.call(ApiKey.LIST_OFFSETS, 10, ListOffsetsRequest(
            replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(name=topic_name, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(partition_index=7, timestamp=-5)])]))
        assert missing.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        client.close()
