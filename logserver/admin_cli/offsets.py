"""Partition offsets by timestamp (ListOffsets), asked of each partition's leader."""

from __future__ import annotations

from kafkaproto import ApiKey
from kafkaproto.messages import ListOffsetsRequest

from .client import Cluster
from .errors import CliError, kafka_error

LATEST = -1  # Kafka's ListOffsets timestamps: the log end offset
EARLIEST = -2  # the log start offset

TopicPartition = tuple[str, int]


def list_offsets(cluster: Cluster, leaders: dict[TopicPartition, int],
                 timestamp: int) -> dict[TopicPartition, int]:
    """Offset of each partition at ``timestamp`` (LATEST, EARLIEST or epoch ms; -1 when
    no record is that recent). ``leaders`` maps each partition to its leader."""
    by_leader: dict[int, list[TopicPartition]] = {}
    for tp, leader in leaders.items():
        if leader < 0:
            raise CliError(f"partition {tp[0]}-{tp[1]} has no leader")
        by_leader.setdefault(leader, []).append(tp)
    out: dict[TopicPartition, int] = {}
    for leader, tps in by_leader.items():
        topics: dict[str, list[int]] = {}
        for topic, partition in tps:
            topics.setdefault(topic, []).append(partition)
        request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=p, current_leader_epoch=-1, timestamp=timestamp)
                for p in partitions])
            for topic, partitions in topics.items()])
        response = cluster.node(leader).ask(ApiKey.LIST_OFFSETS, request, ceiling=7)
        for topic_result in response.topics:
            for p in topic_result.partitions:
                if p.error_code:
                    raise kafka_error(f"offsets of {topic_result.name}-{p.partition_index}",
                                      p.error_code)
                out[(topic_result.name, p.partition_index)] = p.offset
    return out


def leaders_of(cluster: Cluster, topics: list[str]) -> dict[TopicPartition, int]:
    """(topic, partition) -> leader for every partition of ``topics`` (must exist)."""
    out: dict[TopicPartition, int] = {}
    for topic in topics:
        for partition, leader in cluster.topic_partitions(topic).items():
            out[(topic, partition)] = leader
    return out
