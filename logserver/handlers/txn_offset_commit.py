"""TxnOffsetCommit (v0-3): offsets consumed in a transaction, visible only once it
commits. The group's checks (generation, member; v3+) are the group coordinator's; the
offsets wait in the transaction coordinator until EndTxn. As in Kafka, it needs WRITE on
the transactional id, then READ on the group (else every partition fails), then READ on
each topic (else that topic's partitions fail)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from logserver.handlers.commit_partitions import sort_partitions
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.broker import Broker

Topic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
Partition = TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition
FENCED_MIN_VERSION = 2


async def handle(broker: Broker, header: RequestHeader,
                 request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    version = header.api_version
    refused = (checks.denied(broker, checks.TRANSACTIONAL_ID_WRITE, request.transactional_id)
               or checks.denied(broker, checks.TXN_OFFSET_COMMIT_GROUP, request.group_id))
    errors, offsets = sort_partitions(
        broker, request.topics, refused, checks.TXN_OFFSET_COMMIT_TOPIC,
        lambda p: (p.committed_offset, p.committed_leader_epoch if version >= 2 else -1,
                   p.committed_metadata or ""))
    error: int = ErrorCode.NONE
    if version >= 3 and offsets:
        error = broker.groups.check_txn_offset_commit(
            group_id=request.group_id, member_id=request.member_id,
            group_instance_id=request.group_instance_id, generation_id=request.generation_id)
    if error == ErrorCode.NONE and offsets:
        error = await broker.transactions.txn_offset_commit(
            request.transactional_id, request.producer_id, request.producer_epoch,
            request.group_id, offsets)
        if error == ErrorCode.PRODUCER_FENCED and version < FENCED_MIN_VERSION:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
    for tp in offsets:
        errors[tp] = error
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        Topic(name=t.name, partitions=[
            Partition(partition_index=p.partition_index,
                      error_code=errors[(t.name, p.partition_index)])
            for p in t.partitions])
        for t in request.topics])
