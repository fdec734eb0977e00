"""Partition reassignment (KIP-455): AlterPartitionReassignments (45) moves a partition's
replicas onto other brokers, ListPartitionReassignments (46) shows the moves under way."""

from __future__ import annotations

from ..schema import F
from ..spec import api

# fmt: off

ALTER_PARTITION_REASSIGNMENTS = api(
    45,
    "AlterPartitionReassignments",
    "0",
    flexible="0+",
    request=(
        F("TimeoutMs", "int32", "0+", default=60000),
        F(
            "Topics", "[]ReassignableTopic", "0+",
            F("Name", "string", "0+"),
            F(
                "Partitions", "[]ReassignablePartition", "0+",
                F("PartitionIndex", "int32", "0+"),
                # null cancels the reassignment under way
                F("Replicas", "[]int32", "0+", nullable="0+", default=None),
            ),
        ),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
        F(
            "Responses", "[]ReassignableTopicResponse", "0+",
            F("Name", "string", "0+"),
            F(
                "Partitions", "[]ReassignablePartitionResponse", "0+",
                F("PartitionIndex", "int32", "0+"),
                F("ErrorCode", "int16", "0+"),
                F("ErrorMessage", "string", "0+", nullable="0+", default=None),
            ),
        ),
    ),
)

AlterPartitionReassignmentsRequest = ALTER_PARTITION_REASSIGNMENTS.request
AlterPartitionReassignmentsResponse = ALTER_PARTITION_REASSIGNMENTS.response

LIST_PARTITION_REASSIGNMENTS = api(
    46,
    "ListPartitionReassignments",
    "0",
    flexible="0+",
    request=(
        F("TimeoutMs", "int32", "0+", default=60000),
        F(
            "Topics", "[]ListPartitionReassignmentsTopics", "0+",  # null: every reassignment
            F("Name", "string", "0+"),
            F("PartitionIndexes", "[]int32", "0+"),
            nullable="0+", default=None,
        ),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
        F(
            "Topics", "[]OngoingTopicReassignment", "0+",
            F("Name", "string", "0+"),
            F(
                "Partitions", "[]OngoingPartitionReassignment", "0+",
                F("PartitionIndex", "int32", "0+"),
                F("Replicas", "[]int32", "0+"),
                F("AddingReplicas", "[]int32", "0+"),
                F("RemovingReplicas", "[]int32", "0+"),
            ),
        ),
    ),
)

ListPartitionReassignmentsRequest = LIST_PARTITION_REASSIGNMENTS.request
ListPartitionReassignmentsResponse = LIST_PARTITION_REASSIGNMENTS.response
