"""Metadata: this node as the one broker, controller and leader of every partition."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import MetadataRequest, MetadataResponse
from logserver.groups import INTERNAL_TOPICS, OFFSETS_TOPIC
from logserver.topic_names import topic_name_error

if TYPE_CHECKING:
    from logserver.broker import Broker

ZERO_UUID = bytes(16)
Topic = MetadataResponse.MetadataResponseTopic
Partition = MetadataResponse.MetadataResponsePartition


def handle(broker: Broker, header: RequestHeader, request: MetadataRequest) -> MetadataResponse:
    version = header.api_version
    if request.topics is None or (version == 0 and not request.topics):
        wanted = [(name, None) for name in broker.topic_names()]
    else:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    allow_create = request.allow_auto_topic_creation if version >= 4 else True
    topics = [_describe(broker, name, topic_id, allow_create) for name, topic_id in wanted]
    host, port = broker.advertised_address
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=broker.node_id, host=host, port=port, rack=None)],
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        topics=topics,
    )


def _describe(broker: Broker, name: str | None, topic_id: bytes | None, allow_create: bool) -> Topic:
    if name is None:
        name = broker.topic_name_for_id(topic_id) if topic_id and topic_id != ZERO_UUID else None
        if name is None:
            return Topic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=topic_id or ZERO_UUID,
                         partitions=[])
    count = broker.partition_count(name)
    if count is None:
        invalid = topic_name_error(name)
        if invalid is not None:
            return Topic(error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, name=name, partitions=[])
        if not (allow_create and broker.config["auto.create.topics.enable"]):
            return Topic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name, partitions=[])
        if name == OFFSETS_TOPIC:  # created with its own settings, as Kafka does
            if broker.groups.store.ensure_topic() is not None:
                return Topic(error_code=ErrorCode.LEADER_NOT_AVAILABLE, name=name, partitions=[])
        else:
            if broker.topic_limit_error(broker.config["num.partitions"]) is not None:
                return Topic(error_code=ErrorCode.POLICY_VIOLATION, name=name, partitions=[])
            broker.create_topic(name, broker.config["num.partitions"], {})
        count = broker.partition_count(name)
        assert count is not None
    node = broker.node_id
    return Topic(
        error_code=ErrorCode.NONE, name=name, topic_id=broker.topic_id(name),
        is_internal=name in INTERNAL_TOPICS,
        partitions=[
            Partition(error_code=ErrorCode.NONE, partition_index=index, leader_id=node,
                      leader_epoch=broker.leader_epoch, replica_nodes=[node], isr_nodes=[node],
                      offline_replicas=[])
            for index in range(count)
        ],
    )
