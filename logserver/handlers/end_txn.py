"""EndTxn (v0-3): commit or abort the producer's transaction; answered once the markers
are written to every partition and the offsets of a commit are visible. Needs WRITE on
the transactional id."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import EndTxnRequest, EndTxnResponse
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.services import BrokerServices

FENCED_MIN_VERSION = 2


async def handle(broker: BrokerServices, header: RequestHeader, request: EndTxnRequest) -> EndTxnResponse:
    refused = checks.denied(broker, checks.TRANSACTIONAL_ID_WRITE, request.transactional_id)
    if refused:
        return EndTxnResponse(throttle_time_ms=0, error_code=refused)
    error = await broker.transactions.end_txn(
        request.transactional_id, request.producer_id, request.producer_epoch, request.committed)
    if error == ErrorCode.PRODUCER_FENCED and header.api_version < FENCED_MIN_VERSION:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return EndTxnResponse(throttle_time_ms=0, error_code=error)
