"""TxnOffsetCommit (v0-3): offsets consumed in a transaction, visible only once it
commits. Sent to the group's coordinator, as in Kafka, which may not be the
transaction's: the group coordinator checks the group (generation, member; v3+) and
holds the offsets, written to the group's ``__consumer_offsets`` partition as a
transactional batch of the producer, until the transaction's marker reaches that
partition (``groups/txn_offsets.py``). Where this node also coordinates the
transactional id, the transaction is checked too (AddOffsetsToTxn came first). As in
Kafka, it needs WRITE on the transactional id, then READ on the group (else every
partition fails), then READ on each topic (else that topic's partitions fail)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from logserver.groups.group import CommittedOffset
from logserver.handlers.commit_partitions import sort_partitions
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.services import BrokerServices

Topic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
Partition = TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition
FENCED_MIN_VERSION = 2


async def handle(broker: BrokerServices, header: RequestHeader,
                 request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    version = header.api_version
    refused = (checks.denied(broker, checks.TRANSACTIONAL_ID_WRITE, request.transactional_id)
               or checks.denied(broker, checks.TXN_OFFSET_COMMIT_GROUP, request.group_id))
    errors, offsets = sort_partitions(
        broker, request.topics, refused, checks.TXN_OFFSET_COMMIT_TOPIC,
        lambda p: (p.committed_offset, p.committed_leader_epoch if version >= 2 else -1,
                   p.committed_metadata or ""))
    if offsets:
        error = await broker.transactions.check_txn_offset_commit(
            request.transactional_id, request.producer_id, request.producer_epoch,
            request.group_id)
        if error == ErrorCode.NONE:
            now = int(time.time() * 1000)
            committed = await broker.groups.txn_offset_commit(
                group_id=request.group_id, member_id=request.member_id,
                group_instance_id=request.group_instance_id,
                generation_id=request.generation_id, check_member=version >= 3,
                producer_id=request.producer_id, producer_epoch=request.producer_epoch,
                offsets={tp: CommittedOffset(o, e, m, now) for tp, (o, e, m) in offsets.items()})
        else:
            committed = dict.fromkeys(offsets, error)
        for tp, partition_error in committed.items():
            if partition_error == ErrorCode.PRODUCER_FENCED and version < FENCED_MIN_VERSION:
                partition_error = ErrorCode.INVALID_PRODUCER_EPOCH
            errors[tp] = partition_error
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        Topic(name=t.name, partitions=[
            Partition(partition_index=p.partition_index,
                      error_code=errors[(t.name, p.partition_index)])
            for p in t.partitions])
        for t in request.topics])
