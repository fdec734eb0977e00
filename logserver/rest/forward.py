"""Cluster mode: the part of a REST produce whose partitions another broker leads goes
to that leader as a Kafka Produce over its inter-broker listener, in an Envelope that
names the REST caller (cluster/envelope.py): the leader authorises it as the caller, as
Confluent's REST Proxy produces as its caller, and the broker's own principal needs no
WRITE.

The request was already run through this broker's Produce handler (so the principal's
ACLs, the validation and the quotas were applied here); only the partitions that answered
NOT_LEADER_OR_FOLLOWER are sent on, with the same batches, acks=all. What cannot be
forwarded (no leader, unreachable, the Envelope refused) keeps its per-record error, as a
Kafka producer sees it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from kafkaproto import ApiKey
from kafkaproto.messages import ProduceRequest, ProduceResponse
from logserver.cluster import envelope
from logserver.rest import to_node

if TYPE_CHECKING:
    from logserver.cluster_access import WithCluster

log = logging.getLogger(__name__)

PRODUCE_VERSION = 9
PartitionResponse = ProduceResponse.PartitionProduceResponse


async def to_leaders(broker: WithCluster, topic: str, batches: dict[int, bytes],
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


async def _send(broker: WithCluster, leader: int, topic: str, batches: dict[int, bytes],
                timeout_ms: int) -> dict[int, PartitionResponse]:
    request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=timeout_ms, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=p, records=batch)
            for p, batch in batches.items()])])
    wrapped = envelope.wrap(ApiKey.PRODUCE, PRODUCE_VERSION, request, to_node.client_id_of(broker))
    try:
        answer = await to_node.send(broker, leader, ApiKey.ENVELOPE, envelope.ENVELOPE_VERSION,
                                    wrapped, timeout_ms / 1000 + 5)
        body = envelope.unwrap(ApiKey.PRODUCE, PRODUCE_VERSION, answer)
    except to_node.NodeUnreachable:
        return {}
    except envelope.EnvelopeRefused as exc:
        log.warning("produce to %s forwarded to node %d refused: %s", topic, leader, exc)
        return {}
    if not isinstance(body, ProduceResponse):
        return {}
    return {p.index: p for t in body.responses for p in t.partition_responses
            if p.index in batches}
