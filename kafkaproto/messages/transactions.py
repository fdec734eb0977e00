"""Transactions (KIP-98): AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26),
TxnOffsetCommit (28).

Declared over v0-3, the versions clients send (v4+ of AddPartitionsToTxn is the
broker-to-broker batch form of KIP-890; EndTxn v4-5 and TxnOffsetCommit v4-5 belong to
KIP-890's server-side defence, which this server does not implement).
"""

from __future__ import annotations

from ..schema import F
from ..spec import api

# fmt: off

ADD_PARTITIONS_TO_TXN = api(
    24,
    "AddPartitionsToTxn",
    "0-3",
    flexible="3+",
    request=(
        F("TransactionalId", "string", "0+"),
        F("ProducerId", "int64", "0+"),
        F("ProducerEpoch", "int16", "0+"),
        F(
            "Topics", "[]AddPartitionsToTxnTopic", "0+",
            F("Name", "string", "0+"),
            F("Partitions", "[]int32", "0+"),
        ),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "Results", "[]AddPartitionsToTxnTopicResult", "0+",
            F("Name", "string", "0+"),
            F(
                "Results", "[]AddPartitionsToTxnPartitionResult", "0+",
                F("PartitionIndex", "int32", "0+"),
                F("PartitionErrorCode", "int16", "0+"),
            ),
        ),
    ),
)

AddPartitionsToTxnRequest = ADD_PARTITIONS_TO_TXN.request
AddPartitionsToTxnResponse = ADD_PARTITIONS_TO_TXN.response

ADD_OFFSETS_TO_TXN = api(
    25,
    "AddOffsetsToTxn",
    "0-3",
    flexible="3+",
    request=(
        F("TransactionalId", "string", "0+"),
        F("ProducerId", "int64", "0+"),
        F("ProducerEpoch", "int16", "0+"),
        F("GroupId", "string", "0+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
    ),
)

AddOffsetsToTxnRequest = ADD_OFFSETS_TO_TXN.request
AddOffsetsToTxnResponse = ADD_OFFSETS_TO_TXN.response

END_TXN = api(
    26,
    "EndTxn",
    "0-3",
    flexible="3+",
    request=(
        F("TransactionalId", "string", "0+"),
        F("ProducerId", "int64", "0+"),
        F("ProducerEpoch", "int16", "0+"),
        F("Committed", "bool", "0+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
    ),
)

EndTxnRequest = END_TXN.request
EndTxnResponse = END_TXN.response

TXN_OFFSET_COMMIT = api(
    28,
    "TxnOffsetCommit",
    "0-3",
    flexible="3+",
    request=(
        F("TransactionalId", "string", "0+"),
        F("GroupId", "string", "0+"),
        F("ProducerId", "int64", "0+"),
        F("ProducerEpoch", "int16", "0+"),
        F("GenerationId", "int32", "3+", default=-1),
        F("MemberId", "string", "3+", default=""),
        F("GroupInstanceId", "string", "3+", nullable="3+", default=None),
        F(
            "Topics", "[]TxnOffsetCommitRequestTopic", "0+",
            F("Name", "string", "0+"),
            F(
                "Partitions", "[]TxnOffsetCommitRequestPartition", "0+",
                F("PartitionIndex", "int32", "0+"),
                F("CommittedOffset", "int64", "0+"),
                F("CommittedLeaderEpoch", "int32", "2+", default=-1),
                F("CommittedMetadata", "string", "0+", nullable="0+"),
            ),
        ),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "Topics", "[]TxnOffsetCommitResponseTopic", "0+",
            F("Name", "string", "0+"),
            F(
                "Partitions", "[]TxnOffsetCommitResponsePartition", "0+",
                F("PartitionIndex", "int32", "0+"),
                F("ErrorCode", "int16", "0+"),
            ),
        ),
    ),
)

TxnOffsetCommitRequest = TXN_OFFSET_COMMIT.request
TxnOffsetCommitResponse = TXN_OFFSET_COMMIT.response
