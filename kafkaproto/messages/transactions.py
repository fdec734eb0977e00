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

# -- admin: DescribeProducers (61), DescribeTransactions (65), ListTransactions (66) -------

DESCRIBE_PRODUCERS = api(
    61,
    "DescribeProducers",
    "0",
    flexible="0+",
    request=(
        F(
            "Topics", "[]TopicRequest", "0+",
            F("Name", "string", "0+"),
            F("PartitionIndexes", "[]int32", "0+"),
        ),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "Topics", "[]TopicResponse", "0+",
            F("Name", "string", "0+"),
            F(
                "Partitions", "[]PartitionResponse", "0+",
                F("PartitionIndex", "int32", "0+"),
                F("ErrorCode", "int16", "0+"),
                F("ErrorMessage", "string", "0+", nullable="0+", default=None),
                F(
                    "ActiveProducers", "[]ProducerState", "0+",
                    F("ProducerId", "int64", "0+"),
                    F("ProducerEpoch", "int32", "0+"),
                    F("LastSequence", "int32", "0+", default=-1),
                    F("LastTimestamp", "int64", "0+", default=-1),
                    F("CoordinatorEpoch", "int32", "0+"),
                    F("CurrentTxnStartOffset", "int64", "0+", default=-1),
                ),
            ),
        ),
    ),
)

DescribeProducersRequest = DESCRIBE_PRODUCERS.request
DescribeProducersResponse = DESCRIBE_PRODUCERS.response

DESCRIBE_TRANSACTIONS = api(
    65,
    "DescribeTransactions",
    "0",
    flexible="0+",
    request=(
        F("TransactionalIds", "[]string", "0+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "TransactionStates", "[]TransactionState", "0+",
            F("ErrorCode", "int16", "0+"),
            F("TransactionalId", "string", "0+"),
            F("TransactionState", "string", "0+"),
            F("TransactionTimeoutMs", "int32", "0+"),
            F("TransactionStartTimeMs", "int64", "0+"),
            F("ProducerId", "int64", "0+"),
            F("ProducerEpoch", "int16", "0+"),
            F(
                "Topics", "[]TopicData", "0+",
                F("Topic", "string", "0+"),
                F("Partitions", "[]int32", "0+"),
            ),
        ),
    ),
)

DescribeTransactionsRequest = DESCRIBE_TRANSACTIONS.request
DescribeTransactionsResponse = DESCRIBE_TRANSACTIONS.response

LIST_TRANSACTIONS = api(
    66,
    "ListTransactions",
    "0-1",
    flexible="0+",
    request=(
        F("StateFilters", "[]string", "0+"),
        F("ProducerIdFilters", "[]int64", "0+"),
        F("DurationFilter", "int64", "1+", default=-1),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
        F("UnknownStateFilters", "[]string", "0+"),
        F(
            "TransactionStates", "[]TransactionState", "0+",
            F("TransactionalId", "string", "0+"),
            F("ProducerId", "int64", "0+"),
            F("TransactionState", "string", "0+"),
        ),
    ),
)

ListTransactionsRequest = LIST_TRANSACTIONS.request
ListTransactionsResponse = LIST_TRANSACTIONS.response

# -- WriteTxnMarkers (27): what a partition leader is told to write (admin abort) ----------

WRITE_TXN_MARKERS = api(
    27,
    "WriteTxnMarkers",
    "0-1",
    flexible="1+",
    request=(
        F(
            "Markers", "[]WritableTxnMarker", "0+",
            F("ProducerId", "int64", "0+"),
            F("ProducerEpoch", "int16", "0+"),
            F("TransactionResult", "bool", "0+"),
            F(
                "Topics", "[]WritableTxnMarkerTopic", "0+",
                F("Name", "string", "0+"),
                F("PartitionIndexes", "[]int32", "0+"),
            ),
            F("CoordinatorEpoch", "int32", "0+"),
        ),
    ),
    response=(
        F(
            "Markers", "[]WritableTxnMarkerResult", "0+",
            F("ProducerId", "int64", "0+"),
            F(
                "Topics", "[]WritableTxnMarkerTopicResult", "0+",
                F("Name", "string", "0+"),
                F(
                    "Partitions", "[]WritableTxnMarkerPartitionResult", "0+",
                    F("PartitionIndex", "int32", "0+"),
                    F("ErrorCode", "int16", "0+"),
                ),
            ),
        ),
    ),
)

WriteTxnMarkersRequest = WRITE_TXN_MARKERS.request
WriteTxnMarkersResponse = WRITE_TXN_MARKERS.response
