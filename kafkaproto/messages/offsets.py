"""Committed offsets: OffsetCommit (8), OffsetFetch (9), OffsetDelete (47)."""

from __future__ import annotations

from ..schema import F
from ..spec import api

# fmt: off

OFFSET_COMMIT = api(
    8,
    "OffsetCommit",
    "0-9",
    flexible="8+",
    request=(
        F("GroupId", "string", "0+"),
        F("GenerationIdOrMemberEpoch", "int32", "1+", default=-1),
        F("MemberId", "string", "1+"),
        F("GroupInstanceId", "string", "7+", nullable="7+", default=None),
        F("RetentionTimeMs", "int64", "2-4", default=-1),
        F(
            "Topics", "[]OffsetCommitRequestTopic", "0+",
            F("Name", "string", "0-9"),
            F(
                "Partitions", "[]OffsetCommitRequestPartition", "0+",
                F("PartitionIndex", "int32", "0+"),
                F("CommittedOffset", "int64", "0+"),
                F("CommittedLeaderEpoch", "int32", "6+", default=-1),
                F("CommitTimestamp", "int64", "1", default=-1),
                F("CommittedMetadata", "string", "0+", nullable="0+"),
            ),
        ),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "3+"),
        F(
            "Topics", "[]OffsetCommitResponseTopic", "0+",
            F("Name", "string", "0-9"),
            F(
                "Partitions", "[]OffsetCommitResponsePartition", "0+",
                F("PartitionIndex", "int32", "0+"),
                F("ErrorCode", "int16", "0+"),
            ),
        ),
    ),
)

OffsetCommitRequest = OFFSET_COMMIT.request
OffsetCommitResponse = OFFSET_COMMIT.response

OFFSET_FETCH = api(
    9,
    "OffsetFetch",
    "0-9",
    flexible="6+",
    request=(
        F("GroupId", "string", "0-7"),
        F(
            "Topics", "[]OffsetFetchRequestTopic", "0-7",
            F("Name", "string", "0-7"),
            F("PartitionIndexes", "[]int32", "0-7"),
            nullable="2-7",
        ),
        F(
            "Groups", "[]OffsetFetchRequestGroup", "8+",
            F("GroupId", "string", "8+"),
            F("MemberId", "string", "9+", nullable="9+", default=None),
            F("MemberEpoch", "int32", "9+", default=-1),
            F(
                "Topics", "[]OffsetFetchRequestTopics", "8+",
                F("Name", "string", "8-9"),
                F("PartitionIndexes", "[]int32", "8+"),
                nullable="8+",
            ),
        ),
        F("RequireStable", "bool", "7+", default=False),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "3+"),
        F(
            "Topics", "[]OffsetFetchResponseTopic", "0-7",
            F("Name", "string", "0-7"),
            F(
                "Partitions", "[]OffsetFetchResponsePartition", "0-7",
                F("PartitionIndex", "int32", "0-7"),
                F("CommittedOffset", "int64", "0-7"),
                F("CommittedLeaderEpoch", "int32", "5-7", default=-1),
                F("Metadata", "string", "0-7", nullable="0-7"),
                F("ErrorCode", "int16", "0-7"),
            ),
        ),
        F("ErrorCode", "int16", "2-7", default=0),
        F(
            "Groups", "[]OffsetFetchResponseGroup", "8+",
            F("GroupId", "string", "8+"),
            F(
                "Topics", "[]OffsetFetchResponseTopics", "8+",
                F("Name", "string", "8-9"),
                F(
                    "Partitions", "[]OffsetFetchResponsePartitions", "8+",
                    F("PartitionIndex", "int32", "8+"),
                    F("CommittedOffset", "int64", "8+"),
                    F("CommittedLeaderEpoch", "int32", "8+", default=-1),
                    F("Metadata", "string", "8+", nullable="8+"),
                    F("ErrorCode", "int16", "8+"),
                ),
            ),
            F("ErrorCode", "int16", "8+", default=0),
        ),
    ),
)

OffsetFetchRequest = OFFSET_FETCH.request
OffsetFetchResponse = OFFSET_FETCH.response

OFFSET_DELETE = api(
    47,
    "OffsetDelete",
    "0",
    flexible=None,
    request=(
        F("GroupId", "string", "0+"),
        F(
            "Topics", "[]OffsetDeleteRequestTopic", "0+",
            F("Name", "string", "0+"),
            F(
                "Partitions", "[]OffsetDeleteRequestPartition", "0+",
                F("PartitionIndex", "int32", "0+"),
            ),
        ),
    ),
    response=(
        F("ErrorCode", "int16", "0+"),
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "Topics", "[]OffsetDeleteResponseTopic", "0+",
            F("Name", "string", "0+"),
            F(
                "Partitions", "[]OffsetDeleteResponsePartition", "0+",
                F("PartitionIndex", "int32", "0+"),
                F("ErrorCode", "int16", "0+"),
            ),
        ),
    ),
)

OffsetDeleteRequest = OFFSET_DELETE.request
OffsetDeleteResponse = OFFSET_DELETE.response
