"""AddPartitionsToTxn (v0-3): partitions join the producer's transaction before it
writes to them. Without WRITE on the transactional id every partition fails; partitions
of topics without WRITE or unknown ones fail alone and the others get
OPERATION_NOT_ATTEMPTED, as in Kafka."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from logserver.internal_topics import INTERNAL_TOPICS
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.services import BrokerServices

TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
PartitionResult = AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult
FENCED_MIN_VERSION = 2  # older clients hear INVALID_PRODUCER_EPOCH instead of PRODUCER_FENCED


async def handle(broker: BrokerServices, header: RequestHeader,
                 request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    wanted = [(t.name, p) for t in request.topics for p in t.partitions]
    errors: dict[tuple[str, int], int]
    refused = checks.denied(broker, checks.TRANSACTIONAL_ID_WRITE, request.transactional_id)
    failed = {} if refused else _partition_errors(broker, wanted)
    if refused:
        errors = dict.fromkeys(wanted, refused)
    elif failed:
        errors = {tp: failed.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in wanted}
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


def _partition_errors(broker: BrokerServices, wanted: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Partitions that cannot join: no WRITE on the topic (checked first, so existence is
    not revealed), unknown, or internal."""
    writable = {topic for topic in {t for t, _ in wanted}
                if checks.allowed(broker, checks.TXN_ADD_PARTITIONS, topic)}
    failed: dict[tuple[str, int], int] = {}
    for topic, p in wanted:
        if topic not in writable:
            failed[(topic, p)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif topic in INTERNAL_TOPICS or not 0 <= p < (broker.topics.partition_count(topic) or 0):
            failed[(topic, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return failed
