"""AddPartitionsToTxn (v0-3): partitions join the producer's transaction before it
writes to them. Unknown partitions fail alone; the others get OPERATION_NOT_ATTEMPTED,
as in Kafka."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from logserver.groups import INTERNAL_TOPICS

if TYPE_CHECKING:
    from logserver.broker import Broker

TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
PartitionResult = AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult
FENCED_MIN_VERSION = 2  # older clients hear INVALID_PRODUCER_EPOCH instead of PRODUCER_FENCED


async def handle(broker: Broker, header: RequestHeader,
                 request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    wanted = [(t.name, p) for t in request.topics for p in t.partitions]
    unknown = {(topic, p) for topic, p in wanted
               if not 0 <= p < (broker.storage.partition_count(topic) or 0)
               or topic in INTERNAL_TOPICS}
    errors: dict[tuple[str, int], int]
    if unknown:
        errors = {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown
                  else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in wanted}
    else:
        error = await broker.transactions.add_partitions(
            request.transactional_id, request.producer_id, request.producer_epoch, set(wanted))
        if error == ErrorCode.PRODUCER_FENCED and header.api_version < FENCED_MIN_VERSION:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
        errors = dict.fromkeys(wanted, error)
    return AddPartitionsToTxnResponse(throttle_time_ms=0, results=[
        TopicResult(name=t.name, results=[
            PartitionResult(partition_index=p, partition_error_code=errors[(t.name, p)])
            for p in t.partitions])
        for t in request.topics])
