"""Produce (key 0) and InitProducerId (key 22): the write path and idempotent producers."""

from __future__ import annotations

from ..schema import F
from ..spec import api

# fmt: off

PRODUCE = api(
    0,
    "Produce",
    "0-9",
    flexible="9+",
    request=(
        F("TransactionalId", "string", "3+", nullable="3+", default=None),
        F("Acks", "int16", "0+"),
        F("TimeoutMs", "int32", "0+"),
        F(
            "TopicData", "[]TopicProduceData", "0+",
            F("Name", "string", "0-12"),
            F(
                "PartitionData", "[]PartitionProduceData", "0+",
                F("Index", "int32", "0+"),
                F("Records", "records", "0+", nullable="0+"),
            ),
        ),
    ),
    response=(
        F(
            "Responses", "[]TopicProduceResponse", "0+",
            F("Name", "string", "0-12"),
            F(
                "PartitionResponses", "[]PartitionProduceResponse", "0+",
                F("Index", "int32", "0+"),
                F("ErrorCode", "int16", "0+"),
                F("BaseOffset", "int64", "0+"),
                F("LogAppendTimeMs", "int64", "2+", default=-1),
                F("LogStartOffset", "int64", "5+", default=-1),
                F(
                    "RecordErrors", "[]BatchIndexAndErrorMessage", "8+",
                    F("BatchIndex", "int32", "8+"),
                    F("BatchIndexErrorMessage", "string", "8+", nullable="8+", default=None),
                ),
                F("ErrorMessage", "string", "8+", nullable="8+", default=None),
            ),
        ),
        F("ThrottleTimeMs", "int32", "1+"),
    ),
)

ProduceRequest = PRODUCE.request
ProduceResponse = PRODUCE.response

INIT_PRODUCER_ID = api(
    22,
    "InitProducerId",
    "0-4",
    flexible="2+",
    request=(
        F("TransactionalId", "string", "0+", nullable="0+"),
        F("TransactionTimeoutMs", "int32", "0+"),
        F("ProducerId", "int64", "3+", default=-1),
        F("ProducerEpoch", "int16", "3+", default=-1),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
        F("ProducerId", "int64", "0+", default=-1),
        F("ProducerEpoch", "int16", "0+"),
    ),
)

InitProducerIdRequest = INIT_PRODUCER_ID.request
InitProducerIdResponse = INIT_PRODUCER_ID.response
