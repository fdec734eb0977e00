"""The KIP-848 consumer group protocol: ConsumerGroupHeartbeat (68), ConsumerGroupDescribe (69).

As Kafka's message definitions: ConsumerGroupHeartbeat v1 adds the subscribed topic regex
and makes the client generate its own member id (KIP-1082); ConsumerGroupDescribe v1
adds each member's type (KIP-1099). Partitions travel by topic id.
"""

from __future__ import annotations

from ..schema import F, struct
from ..spec import api

# fmt: off

CONSUMER_GROUP_HEARTBEAT = api(
    68,
    "ConsumerGroupHeartbeat",
    "0-1",
    flexible="0+",
    request=(
        F("GroupId", "string", "0+"),
        F("MemberId", "string", "0+"),
        F("MemberEpoch", "int32", "0+"),
        F("InstanceId", "string", "0+", nullable="0+", default=None),
        F("RackId", "string", "0+", nullable="0+", default=None),
        F("RebalanceTimeoutMs", "int32", "0+", default=-1),
        F("SubscribedTopicNames", "[]string", "0+", nullable="0+", default=None),
        F("SubscribedTopicRegex", "string", "1+", nullable="1+", default=None),
        F("ServerAssignor", "string", "0+", nullable="0+", default=None),
        F(
            "TopicPartitions", "[]TopicPartitions", "0+",
            F("TopicId", "uuid", "0+"),
            F("Partitions", "[]int32", "0+"),
            nullable="0+", default=None,
        ),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
        F("MemberId", "string", "0+", nullable="0+", default=None),
        F("MemberEpoch", "int32", "0+"),
        F("HeartbeatIntervalMs", "int32", "0+"),
        F(
            "Assignment", "Assignment", "0+",
            F("TopicPartitions", "[]TopicPartitions", "0+"),
            nullable="0+", default=None,
        ),
    ),
    common=(
        struct(
            "TopicPartitions",
            F("TopicId", "uuid", "0+"),
            F("Partitions", "[]int32", "0+"),
        ),
    ),
)

ConsumerGroupHeartbeatRequest = CONSUMER_GROUP_HEARTBEAT.request
ConsumerGroupHeartbeatResponse = CONSUMER_GROUP_HEARTBEAT.response

CONSUMER_GROUP_DESCRIBE = api(
    69,
    "ConsumerGroupDescribe",
    "0-1",
    flexible="0+",
    request=(
        F("GroupIds", "[]string", "0+"),
        F("IncludeAuthorizedOperations", "bool", "0+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "Groups", "[]DescribedGroup", "0+",
            F("ErrorCode", "int16", "0+"),
            F("ErrorMessage", "string", "0+", nullable="0+", default=None),
            F("GroupId", "string", "0+"),
            F("GroupState", "string", "0+"),
            F("GroupEpoch", "int32", "0+"),
            F("AssignmentEpoch", "int32", "0+"),
            F("AssignorName", "string", "0+"),
            F(
                "Members", "[]Member", "0+",
                F("MemberId", "string", "0+"),
                F("InstanceId", "string", "0+", nullable="0+", default=None),
                F("RackId", "string", "0+", nullable="0+", default=None),
                F("MemberEpoch", "int32", "0+"),
                F("ClientId", "string", "0+"),
                F("ClientHost", "string", "0+"),
                F("SubscribedTopicNames", "[]string", "0+"),
                F("SubscribedTopicRegex", "string", "0+", nullable="0+", default=None),
                F("Assignment", "Assignment", "0+"),
                F("TargetAssignment", "Assignment", "0+"),
                F("MemberType", "int8", "1+", default=-1),
            ),
            F("AuthorizedOperations", "int32", "0+", default=-(2**31)),
        ),
    ),
    common=(
        struct(
            "TopicPartitions",
            F("TopicId", "uuid", "0+"),
            F("TopicName", "string", "0+"),
            F("Partitions", "[]int32", "0+"),
        ),
        struct(
            "Assignment",
            F("TopicPartitions", "[]TopicPartitions", "0+"),
        ),
    ),
)

ConsumerGroupDescribeRequest = CONSUMER_GROUP_DESCRIBE.request
ConsumerGroupDescribeResponse = CONSUMER_GROUP_DESCRIBE.response
