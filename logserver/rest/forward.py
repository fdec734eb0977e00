"""Cluster mode: the part of a REST produce whose partitions another broker leads goes
to that leader as a Kafka Produce over its inter-broker listener.

The request was already run through this broker's Produce handler (so the principal's
ACLs, the validation and the quotas were applied here); only the partitions that answered
NOT_LEADER_OR_FOLLOWER are sent on, with the same batches, acks=all. What cannot be
forwarded (no leader, unreachable) keeps its per-record error, as a Kafka producer sees it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kafkaproto import ApiKey
from kafkaproto.messages import ProduceRequest, ProduceResponse
from logserver.rest import to_node

if TYPE_CHECKING:
    from logserver.broker import Broker

PRODUCE_VERSION = 9
PartitionResponse = ProduceResponse.PartitionProduceResponse


async def to_leaders(broker: Broker, topic: str, batches: dict[int, bytes],
                     timeout_ms: int) -> dict[int, PartitionResponse]:
    """Each partition's answer from its leader (those that could be asked)."""
    cluster = broker.cluster
    if cluster is None or not batches:
        return {}
    by_leader: dict[int, dict[int, bytes]] = {}
    for partition, batch in batches.items():
        state = cluster.model.partition(topic, partition)
        if state is not None and state.leader != broker.node_id \
                and state.leader in cluster.model.brokers:
            by_leader.setdefault(state.leader, {})[partition] = batch
    answers: dict[int, PartitionResponse] = {}
    for found in await asyncio.gather(*(_send(broker, leader, topic, part, timeout_ms)
                                        for leader, part in by_leader.items())):
        answers.update(found)
    return answers


async def _send(broker: Broker, leader: int, topic: str, batches: dict[int, bytes],
                timeout_ms: int) -> dict[int, PartitionResponse]:
    request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=timeout_ms, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=p, records=batch)
            for p, batch in batches.items()])])
    try:
        body = await to_node.send(broker, leader, ApiKey.PRODUCE, PRODUCE_VERSION, request,
                                  timeout_ms / 1000 + 5)
    except to_node.NodeUnreachable:
        return {}
    if not isinstance(body, ProduceResponse):
        return {}
    return {p.index: p for t in body.responses for p in t.partition_responses
            if p.index in batches}
