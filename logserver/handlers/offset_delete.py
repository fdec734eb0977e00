"""OffsetDelete (KIP-496): drop committed offsets of partitions the group does not consume.

A live consumer group keeps the offsets of topics it subscribes to
(GROUP_SUBSCRIBED_TO_TOPIC); an empty group may drop any. Unknown partitions get
UNKNOWN_TOPIC_OR_PARTITION; a group-level error leaves the topic list empty.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import OffsetDeleteRequest, OffsetDeleteResponse
from logserver.groups.respond import respond
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.services import BrokerServices

Topic = OffsetDeleteResponse.OffsetDeleteResponseTopic
Partition = OffsetDeleteResponse.OffsetDeleteResponsePartition
TopicPartition = tuple[str, int]


def handle(broker: BrokerServices, header: RequestHeader, request: OffsetDeleteRequest) -> (
        OffsetDeleteResponse | Awaitable[OffsetDeleteResponse]):
    if not checks.allowed(broker, checks.OFFSET_DELETE_GROUP, request.group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                    throttle_time_ms=0, topics=[])
    errors: dict[TopicPartition, int] = {}
    known: list[TopicPartition] = []
    for topic in request.topics:
        count = broker.topics.partition_count(topic.name)
        refused = checks.denied(broker, checks.OFFSET_DELETE_TOPIC, topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if refused:
                errors[tp] = refused
            elif count is None or not 0 <= p.partition_index < count:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                known.append(tp)

    def build(outcome: tuple[int, dict[TopicPartition, int]]) -> OffsetDeleteResponse:
        group_error, partition_errors = outcome
        if group_error != ErrorCode.NONE:
            return OffsetDeleteResponse(error_code=group_error, throttle_time_ms=0, topics=[])
        results = {**errors, **partition_errors}
        return OffsetDeleteResponse(error_code=ErrorCode.NONE, throttle_time_ms=0, topics=[
            Topic(name=t.name, partitions=[
                Partition(partition_index=p.partition_index,
                          error_code=results.get((t.name, p.partition_index), ErrorCode.NONE))
                for p in t.partitions])
            for t in request.topics])

    return respond(broker.groups.delete_offsets(request.group_id, known), build)
