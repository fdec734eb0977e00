"""AddOffsetsToTxn (v0-3): a consumer group's offsets join the producer's transaction
(sendOffsetsToTransaction, before TxnOffsetCommit). Needs WRITE on the transactional id
and READ on the group, as in Kafka."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.services import BrokerServices

FENCED_MIN_VERSION = 2


async def handle(broker: BrokerServices, header: RequestHeader,
                 request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    refused = (checks.denied(broker, checks.TRANSACTIONAL_ID_WRITE, request.transactional_id)
               or checks.denied(broker, checks.TXN_OFFSET_COMMIT_GROUP, request.group_id))
    if refused:
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=refused)
    if not request.group_id:
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_GROUP_ID)
    error = await broker.transactions.add_offsets(
        request.transactional_id, request.producer_id, request.producer_epoch, request.group_id)
    if error == ErrorCode.PRODUCER_FENCED and header.api_version < FENCED_MIN_VERSION:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=error)
