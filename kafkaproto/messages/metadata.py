"""Metadata (key 3): brokers, topics, partitions and leaders."""

from __future__ import annotations

from ..schema import F
from ..spec import api

# fmt: off

#: Kafka's "authorized operations not requested" marker (INT32_MIN).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)

METADATA = api(
    3,
    "Metadata",
    "0-12",
    flexible="9+",
    request=(
        F(
            "Topics", "[]MetadataRequestTopic", "0+",
            F("TopicId", "uuid", "10+"),
            F("Name", "string", "0+", nullable="10+"),
            nullable="1+",
        ),
        F("AllowAutoTopicCreation", "bool", "4+", default=True),
        F("IncludeClusterAuthorizedOperations", "bool", "8-10"),
        F("IncludeTopicAuthorizedOperations", "bool", "8+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "3+"),
        F(
            "Brokers", "[]MetadataResponseBroker", "0+",
            F("NodeId", "int32", "0+"),
            F("Host", "string", "0+"),
            F("Port", "int32", "0+"),
            F("Rack", "string", "1+", nullable="1+", default=None),
        ),
        F("ClusterId", "string", "2+", nullable="2+", default=None),
        F("ControllerId", "int32", "1+", default=-1),
        F(
            "Topics", "[]MetadataResponseTopic", "0+",
            F("ErrorCode", "int16", "0+"),
            F("Name", "string", "0+", nullable="12+"),
            F("TopicId", "uuid", "10+"),
            F("IsInternal", "bool", "1+", default=False),
            F(
                "Partitions", "[]MetadataResponsePartition", "0+",
                F("ErrorCode", "int16", "0+"),
                F("PartitionIndex", "int32", "0+"),
                F("LeaderId", "int32", "0+"),
                F("LeaderEpoch", "int32", "7+", default=-1),
                F("ReplicaNodes", "[]int32", "0+"),
                F("IsrNodes", "[]int32", "0+"),
                F("OfflineReplicas", "[]int32", "5+"),
            ),
            F("TopicAuthorizedOperations", "int32", "8+", default=AUTHORIZED_OPERATIONS_OMITTED),
        ),
        F("ClusterAuthorizedOperations", "int32", "8-10", default=AUTHORIZED_OPERATIONS_OMITTED),
    ),
)

MetadataRequest = METADATA.request
MetadataResponse = METADATA.response
