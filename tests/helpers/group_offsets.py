"""Consumer group offsets on a test cluster: committing one with confluent-kafka's
AdminClient, and finding a group id whose coordinator is a given broker."""

from __future__ import annotations

from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

from helpers.clusterprocs import Cluster
from helpers.kafkaclient import BlockingClient
from helpers.waiting import wait_until
from kafkaproto import ApiKey
from kafkaproto.messages import FindCoordinatorRequest

COMMITTED = 12


def coordinator(port: int, group: str) -> int:
    client = BlockingClient(port, timeout=20)
    try:
        answer = client.call(ApiKey.FIND_COORDINATOR, 3,
                             FindCoordinatorRequest(key=group, key_type=0))
    finally:
        client.close()
    return answer.node_id if answer.error_code == 0 else -1


def group_on(cluster: Cluster, node: int) -> str:
    """A group id whose coordinator is ``node`` (the coordinator is its offsets
    partition's leader: try our own names until one lands there)."""
    port = cluster.brokers[1].port
    for i in range(200):
        group = f"viewed-{i}"
        found = wait_until(lambda g=group: coordinator(port, g) + 1, 30, "a coordinator") - 1
        if found == node:
            return group
    raise AssertionError(f"no group coordinated by broker {node}")


def commit(admin: Any, group: str, topic: str, offset: int = COMMITTED) -> bool:
    """Commit ``offset`` of partition 0; False while the coordinator answers
    NOT_COORDINATOR (its offsets partition still being taken over after its creation)."""
    done = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, 0, offset)])])
    [future] = done.values()
    [result] = future.result(timeout=30).topic_partitions
    return result.error is None
