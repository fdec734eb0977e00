"""ConsumerGroupDescribe (v0-1): a KIP-848 group's epochs, assignor and members, with
each member's current and target assignment (by topic id and name).

GROUP_ID_NOT_FOUND for a group that is not a consumer-protocol group (the Java admin
then falls back to DescribeGroups). With ACLs, as Kafka: DESCRIBE on the group, else
GROUP_AUTHORIZATION_FAILED; v1 says each member is a consumer-protocol member (1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse
from logserver.groups.consumer.model import Partitions
from logserver.security import checks
from logserver.security.acl import ResourceType

if TYPE_CHECKING:
    from logserver.services import BrokerServices

Described = ConsumerGroupDescribeResponse.DescribedGroup
Member = ConsumerGroupDescribeResponse.Member
Assignment = ConsumerGroupDescribeResponse.Assignment
TopicPartitions = ConsumerGroupDescribeResponse.TopicPartitions
CONSUMER_MEMBER_TYPE = 1


def handle(broker: BrokerServices, header: RequestHeader,
           request: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
    catalog = broker.topics  # the cluster's topic ids in cluster mode, as Metadata's

    def assignment(partitions: Partitions) -> Assignment:
        topics = []
        for name in sorted(partitions):
            topic_id = catalog.topic_id(name)
            if topic_id is not None and partitions[name]:
                topics.append(TopicPartitions(topic_id=topic_id, topic_name=name,
                                              partitions=sorted(partitions[name])))
        return Assignment(topic_partitions=topics)

    described = []
    for group_id in request.group_ids:
        if not checks.allowed(broker, checks.DESCRIBE_GROUPS, group_id):
            described.append(Described(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                       group_id=group_id))
            continue
        error, group = broker.groups.describe_consumer_group(group_id)
        if group is None:
            message = (f"Group {group_id} is not a consumer group."
                       if error == ErrorCode.GROUP_ID_NOT_FOUND else None)
            described.append(Described(error_code=error, error_message=message,
                                       group_id=group_id))
            continue
        entry = Described(
            error_code=ErrorCode.NONE, group_id=group_id, group_state=group.state.value,
            group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
            assignor_name=group.assignor or broker.groups.consumer.settings.assignors[0],
            members=[Member(
                member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                member_epoch=m.epoch, client_id=m.client_id, client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_names),
                subscribed_topic_regex=m.subscribed_regex,
                assignment=assignment(m.assigned),
                target_assignment=assignment(group.target.get(m.member_id, {})),
                member_type=CONSUMER_MEMBER_TYPE)
                for m in group.members.values()])
        if request.include_authorized_operations:
            entry.authorized_operations = checks.authorized_operations(
                broker, ResourceType.GROUP, group_id)
        described.append(entry)
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=described)
