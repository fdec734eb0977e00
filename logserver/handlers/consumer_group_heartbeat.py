"""ConsumerGroupHeartbeat (v0-1): the whole KIP-848 consumer protocol in one request.

The decisions are the consumer group machine's (``logserver/groups/consumer``); this
handler checks ACLs as JoinGroup does (READ on the group, DESCRIBE on each subscribed
topic name), maps partitions from topic ids to names and back, and answers once the
records the heartbeat caused are durable. Owned partitions of topic ids we do not know
(a topic deleted meanwhile) are left out, as Kafka does.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from logserver import request_context
from logserver.groups.consumer.machine import HeartbeatRequest, HeartbeatResult
from logserver.groups.consumer.model import Partitions
from logserver.groups.respond import respond
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.services import BrokerServices

Assignment = ConsumerGroupHeartbeatResponse.Assignment
TopicPartitions = ConsumerGroupHeartbeatResponse.TopicPartitions


def handle(broker: BrokerServices, header: RequestHeader, request: ConsumerGroupHeartbeatRequest
           ) -> ConsumerGroupHeartbeatResponse | Awaitable[ConsumerGroupHeartbeatResponse]:
    if not checks.allowed(broker, checks.CONSUMER_GROUP_HEARTBEAT, request.group_id):
        return _error(ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    for topic in request.subscribed_topic_names or ():
        if not checks.allowed(broker, checks.CONSUMER_GROUP_HEARTBEAT_TOPIC, topic):
            return _error(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                          f"The group is not authorized to describe topic {topic}.")
    catalog = broker.topics  # the cluster's topic ids in cluster mode, as Metadata's
    owned: Partitions | None = None
    if request.topic_partitions is not None:
        owned = {}
        for tp in request.topic_partitions:
            name = catalog.topic_for_id(bytes(tp.topic_id))
            if name is not None and tp.partitions:
                owned.setdefault(name, set()).update(tp.partitions)
    version = header.api_version
    future = broker.groups.consumer_group_heartbeat(HeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_names=request.subscribed_topic_names,
        subscribed_regex=request.subscribed_topic_regex if version >= 1 else None,
        server_assignor=request.server_assignor,
        owned=owned,
        client_id=header.client_id or "",
        client_host=request_context.client_host.get(),
        version=version,
    ))

    def build(result: HeartbeatResult) -> ConsumerGroupHeartbeatResponse:
        if result.error != ErrorCode.NONE:
            return _error(result.error, result.message)
        assignment = None
        if result.assignment is not None:
            topics = []
            for name in sorted(result.assignment):
                topic_id = catalog.topic_id(name)
                if topic_id is not None and result.assignment[name]:
                    topics.append(TopicPartitions(topic_id=topic_id,
                                                  partitions=sorted(result.assignment[name])))
            assignment = Assignment(topic_partitions=topics)
        return ConsumerGroupHeartbeatResponse(
            throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
            member_id=result.member_id, member_epoch=result.member_epoch,
            heartbeat_interval_ms=result.heartbeat_interval_ms, assignment=assignment)

    return respond(future, build)


def _error(error: int, message: str | None) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(throttle_time_ms=0, error_code=error,
                                          error_message=message, member_id=None,
                                          member_epoch=0, heartbeat_interval_ms=0)
