"""InitProducerId: ids for idempotent producers, and for transactional ones through the
transaction coordinator (logserver/transactions).

A producer that presents its id and epoch (v3+, KIP-360) keeps its id with the epoch
bumped, which resets its sequences; everyone else gets a fresh id at epoch 0.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import InitProducerIdRequest, InitProducerIdResponse
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.services import BrokerServices

log = logging.getLogger(__name__)

MAX_EPOCH = 32767


def handle(broker: BrokerServices, header: RequestHeader, request: InitProducerIdRequest) -> (
        InitProducerIdResponse | Awaitable[InitProducerIdResponse]):
    if request.transactional_id is not None:
        if not checks.allowed(broker, checks.TRANSACTIONAL_ID_WRITE, request.transactional_id):
            return InitProducerIdResponse(
                throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                producer_id=-1, producer_epoch=-1)
        return _transactional(broker, header.api_version, request)
    # Kafka since KIP-679: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic.
    if not (checks.allowed(broker, checks.INIT_PRODUCER_ID)
            or checks.allowed_any(broker, checks.PRODUCE)):
        return InitProducerIdResponse(
            throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            producer_id=-1, producer_epoch=-1)
    producer_id, epoch = request.producer_id, request.producer_epoch
    if header.api_version >= 3 and producer_id >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                      producer_id=producer_id, producer_epoch=epoch + 1)
    return _new_producer(broker)


async def _new_producer(broker: BrokerServices) -> InitProducerIdResponse:
    try:
        # May reserve a block: on disk, or cluster-wide in etcd (cluster mode).
        producer_id = await broker.allocate_producer_id()
    except Exception as exc:  # etcd unreachable, disk failing: the client retries
        log.warning("allocating a producer id failed: %s", exc)
        return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                      producer_id=-1, producer_epoch=-1)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                  producer_id=producer_id, producer_epoch=0)


async def _transactional(broker: BrokerServices, version: int,
                         request: InitProducerIdRequest) -> InitProducerIdResponse:
    producer_id, epoch = (request.producer_id, request.producer_epoch) if version >= 3 else (-1, -1)
    error, producer_id, epoch = await broker.transactions.init_producer_id(
        request.transactional_id or "", request.transaction_timeout_ms, producer_id, epoch)
    if error == ErrorCode.PRODUCER_FENCED and version < 4:
        error = ErrorCode.INVALID_PRODUCER_EPOCH  # as Kafka answers clients before KIP-588
    return InitProducerIdResponse(throttle_time_ms=0, error_code=error,
                                  producer_id=producer_id, producer_epoch=epoch)
