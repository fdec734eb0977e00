"""Produce: validate and append one batch per partition; acks decide what we wait for.

acks=0 gets no response at all; acks=1 and acks=-1 are the same on a single node (the
leader is the whole ISR), and both wait for an fsync when the durability setting asks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, cast

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import ProduceRequest, ProduceResponse
from logserver.groups import INTERNAL_TOPICS
from logserver.security import checks
from logserver.storage.api import AppendResult
from logserver.transactions.produce_check import is_transactional, transactional_produce_error

if TYPE_CHECKING:
    from logserver.broker import Broker

PartitionResponse = ProduceResponse.PartitionProduceResponse


def handle(broker: Broker, header: RequestHeader, request: ProduceRequest) -> (
        ProduceResponse | Awaitable[ProduceResponse] | None):
    acks = request.acks
    error: int = ErrorCode.INVALID_REQUIRED_ACKS if acks not in (-1, 0, 1) else ErrorCode.NONE
    waits: list[Awaitable[None]] = []
    deferred: list[tuple[PartitionResponse, Awaitable[AppendResult]]] = []
    topics = []
    error = error or _transactional_id_denied(broker, request)
    for topic in request.topic_data:
        partitions = []
        refused = error or checks.denied(broker, checks.PRODUCE, topic.name)
        for data in topic.partition_data:
            if refused:
                partitions.append(PartitionResponse(index=data.index, error_code=refused, base_offset=-1))
                continue
            if topic.name in INTERNAL_TOPICS:  # only the group coordinator writes there
                partitions.append(PartitionResponse(
                    index=data.index, error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, base_offset=-1,
                    log_append_time_ms=-1, log_start_offset=-1, error_message=f"cannot append to internal topic {topic.name}"))
                continue
            # The decoder hands records over as a writable view of the request frame.
            records = cast("memoryview | None", data.records)
            txn_error = transactional_produce_error(broker, request.transactional_id,
                                                    topic.name, data.index, records)
            if txn_error:
                partitions.append(PartitionResponse(index=data.index, error_code=txn_error, base_offset=-1))
                continue
            result = broker.storage.append(topic.name, data.index, records, header.api_version)
            partition = _partition_response(data.index, result)
            partitions.append(partition)
            if result.deferred is not None:  # validated off the event loop: filled in later
                deferred.append((partition, result.deferred))
            elif result.wait is not None:
                waits.append(result.wait)
        topics.append(ProduceResponse.TopicProduceResponse(name=topic.name, partition_responses=partitions))
    if acks == 0:
        return None
    response = ProduceResponse(responses=topics, throttle_time_ms=0)
    if deferred:
        return _after_validation(response, deferred, waits)
    if not waits:
        return response
    return _after_fsync(response, waits)


def _transactional_id_denied(broker: Broker, request: ProduceRequest) -> int:
    """Kafka's first check of a Produce holding a transactional batch (KafkaApis
    handleProduceRequest): without a transactional id, or without WRITE on it when ACLs
    are on, every partition gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED and nothing is
    appended (Kafka looks at the first batch of each partition)."""
    if not any(is_transactional(cast("memoryview | None", data.records))
               for topic in request.topic_data for data in topic.partition_data):
        return ErrorCode.NONE
    txn_id = request.transactional_id
    if txn_id is None:
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if broker.authorizer is None:
        return ErrorCode.NONE
    return checks.denied(broker, checks.TRANSACTIONAL_ID_WRITE, txn_id)


def _partition_response(index: int, result: AppendResult) -> PartitionResponse:
    return PartitionResponse(
        index=index, error_code=result.error, base_offset=result.base_offset,
        log_append_time_ms=result.log_append_time, log_start_offset=result.log_start_offset,
        error_message=result.message)


async def _after_validation(response: ProduceResponse,
                            deferred: list[tuple[PartitionResponse, Awaitable[AppendResult]]],
                            waits: list[Awaitable[None]]) -> ProduceResponse:
    for partition, pending in deferred:
        result = await pending
        filled = _partition_response(partition.index, result)
        partition.error_code = filled.error_code
        partition.base_offset = filled.base_offset
        partition.log_append_time_ms = filled.log_append_time_ms
        partition.log_start_offset = filled.log_start_offset
        partition.error_message = filled.error_message
        if result.wait is not None:
            waits.append(result.wait)
    if not waits:
        return response
    return await _after_fsync(response, waits)


async def _after_fsync(response: ProduceResponse, waits: list[Awaitable[None]]) -> ProduceResponse:
    results = await asyncio.gather(*waits, return_exceptions=True)
    if any(isinstance(result, BaseException) for result in results):
        for topic in response.responses:
            for partition in topic.partition_responses:
                if partition.error_code == ErrorCode.NONE:
                    partition.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                    partition.error_message = "write or fsync failed"
    return response
