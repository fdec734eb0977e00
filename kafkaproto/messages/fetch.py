"""Fetch (key 1) and ListOffsets (key 2): the read path.

Fetch v13+ names topics by id only (KIP-516); v15 moves the replica id into the tagged
ReplicaState (KIP-903); v16 adds the tagged NodeEndpoints to the response (for leader changes;
empty, so left off the wire, on one node).
"""

from __future__ import annotations

from ..schema import F
from ..spec import api

# fmt: off

FETCH = api(
    1,
    "Fetch",
    "0-16",
    flexible="12+",
    request=(
        F("ClusterId", "string", "12+", nullable="12+", default=None, tag=0),
        F("ReplicaId", "int32", "0-14", default=-1),
        F(
            "ReplicaState", "ReplicaState", "15+",
            F("ReplicaId", "int32", "15+", default=-1),
            F("ReplicaEpoch", "int64", "15+", default=-1),
            tag=1,
        ),
        F("MaxWaitMs", "int32", "0+"),
        F("MinBytes", "int32", "0+"),
        F("MaxBytes", "int32", "3+", default=0x7FFFFFFF),
        F("IsolationLevel", "int8", "4+", default=0),
        F("SessionId", "int32", "7+", default=0),
        F("SessionEpoch", "int32", "7+", default=-1),
        F(
            "Topics", "[]FetchTopic", "0+",
            F("Topic", "string", "0-12"),
            F("TopicId", "uuid", "13+"),
            F(
                "Partitions", "[]FetchPartition", "0+",
                F("Partition", "int32", "0+"),
                F("CurrentLeaderEpoch", "int32", "9+", default=-1),
                F("FetchOffset", "int64", "0+"),
                F("LastFetchedEpoch", "int32", "12+", default=-1),
                F("LogStartOffset", "int64", "5+", default=-1),
                F("PartitionMaxBytes", "int32", "0+"),
            ),
        ),
        F(
            "ForgottenTopicsData", "[]ForgottenTopic", "7+",
            F("Topic", "string", "7-12"),
            F("TopicId", "uuid", "13+"),
            F("Partitions", "[]int32", "7+"),
        ),
        F("RackId", "string", "11+", default=""),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "1+"),
        F("ErrorCode", "int16", "7+"),
        F("SessionId", "int32", "7+", default=0),
        F(
            "Responses", "[]FetchableTopicResponse", "0+",
            F("Topic", "string", "0-12"),
            F("TopicId", "uuid", "13+"),
            F(
                "Partitions", "[]PartitionData", "0+",
                F("PartitionIndex", "int32", "0+"),
                F("ErrorCode", "int16", "0+"),
                F("HighWatermark", "int64", "0+"),
                F("LastStableOffset", "int64", "4+", default=-1),
                F("LogStartOffset", "int64", "5+", default=-1),
                F(
                    "DivergingEpoch", "EpochEndOffset", "12+",
                    F("Epoch", "int32", "12+", default=-1),
                    F("EndOffset", "int64", "12+", default=-1),
                    tag=0,
                ),
                F(
                    "CurrentLeader", "LeaderIdAndEpoch", "12+",
                    F("LeaderId", "int32", "12+", default=-1),
                    F("LeaderEpoch", "int32", "12+", default=-1),
                    tag=1,
                ),
                F(
                    "SnapshotId", "SnapshotId", "12+",
                    F("EndOffset", "int64", "0+", default=-1),
                    F("Epoch", "int32", "0+", default=-1),
                    tag=2,
                ),
                F(
                    "AbortedTransactions", "[]AbortedTransaction", "4+",
                    F("ProducerId", "int64", "4+"),
                    F("FirstOffset", "int64", "4+"),
                    nullable="4+",
                ),
                F("PreferredReadReplica", "int32", "11+", default=-1),
                F("Records", "records", "0+", nullable="0+"),
            ),
        ),
        F(
            "NodeEndpoints", "[]NodeEndpoint", "16+",
            F("NodeId", "int32", "16+"),
            F("Host", "string", "16+"),
            F("Port", "int32", "16+"),
            F("Rack", "string", "16+", nullable="16+", default=None),
            tag=0,
        ),
    ),
)

FetchRequest = FETCH.request
FetchResponse = FETCH.response

# v7: -3 max timestamp (KIP-734); v8: -4 earliest local (KIP-405); v9: -5 latest tiered
# (KIP-1005); v10: TimeoutMs for remote lookups (KIP-1075). The response is unchanged.
LIST_OFFSETS = api(
    2,
    "ListOffsets",
    "0-10",
    flexible="6+",
    request=(
        F("ReplicaId", "int32", "0+"),
        F("IsolationLevel", "int8", "2+"),
        F(
            "Topics", "[]ListOffsetsTopic", "0+",
            F("Name", "string", "0+"),
            F(
                "Partitions", "[]ListOffsetsPartition", "0+",
                F("PartitionIndex", "int32", "0+"),
                F("CurrentLeaderEpoch", "int32", "4+", default=-1),
                F("Timestamp", "int64", "0+"),
                F("MaxNumOffsets", "int32", "0", default=1),
            ),
        ),
        F("TimeoutMs", "int32", "10+", default=0),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "2+"),
        F(
            "Topics", "[]ListOffsetsTopicResponse", "0+",
            F("Name", "string", "0+"),
            F(
                "Partitions", "[]ListOffsetsPartitionResponse", "0+",
                F("PartitionIndex", "int32", "0+"),
                F("ErrorCode", "int16", "0+"),
                F("OldStyleOffsets", "[]int64", "0"),
                F("Timestamp", "int64", "1+", default=-1),
                F("Offset", "int64", "1+", default=-1),
                F("LeaderEpoch", "int32", "4+", default=-1),
            ),
        ),
    ),
)

ListOffsetsRequest = LIST_OFFSETS.request
ListOffsetsResponse = LIST_OFFSETS.response

OFFSET_FOR_LEADER_EPOCH = api(
    23,
    "OffsetForLeaderEpoch",
    "0-4",
    flexible="4+",
    request=(
        F("ReplicaId", "int32", "3+", default=-2),
        F(
            "Topics", "[]OffsetForLeaderTopic", "0+",
            F("Topic", "string", "0+"),
            F(
                "Partitions", "[]OffsetForLeaderPartition", "0+",
                F("Partition", "int32", "0+"),
                F("CurrentLeaderEpoch", "int32", "2+", default=-1),
                F("LeaderEpoch", "int32", "0+"),
            ),
        ),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "2+"),
        F(
            "Topics", "[]OffsetForLeaderTopicResult", "0+",
            F("Topic", "string", "0+"),
            F(
                "Partitions", "[]EpochEndOffset", "0+",
                F("ErrorCode", "int16", "0+"),
                F("Partition", "int32", "0+"),
                F("LeaderEpoch", "int32", "1+", default=-1),
                F("EndOffset", "int64", "0+", default=-1),
            ),
        ),
    ),
)

OffsetForLeaderEpochRequest = OFFSET_FOR_LEADER_EPOCH.request
OffsetForLeaderEpochResponse = OFFSET_FOR_LEADER_EPOCH.response
