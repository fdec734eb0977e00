"""Produce: validate and append one batch per partition; acks decide what we wait for.

acks=0 gets no response at all, but an error on any partition closes the connection, as
in Kafka (the close is the only error an acks=0 producer can see); acks=1 and acks=-1 are the same on a single node (the
leader is the whole ISR), and both wait for an fsync when the durability setting asks.
The same handler serves cluster mode: ``broker.routing`` (logserver.partition_routing)
refuses partitions this broker does not lead and makes acks=all wait for the ISR.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.batch import parse_header
from kafkaproto.messages import ProduceRequest, ProduceResponse
from logserver.close_connection import CloseConnection
from logserver.internal_topics import INTERNAL_TOPICS
from logserver.security import checks
from logserver.storage.api import AppendResult
from logserver.transactions.produce_check import is_transactional, transactional_produce_error

if TYPE_CHECKING:
    from logserver.services import BrokerServices

PartitionResponse = ProduceResponse.PartitionProduceResponse
RecordError = ProduceResponse.BatchIndexAndErrorMessage


def handle(broker: BrokerServices, header: RequestHeader, request: ProduceRequest) -> (
        ProduceResponse | Awaitable[ProduceResponse | CloseConnection | None]
        | CloseConnection | None):
    acks = request.acks
    routing = broker.routing
    error: int = ErrorCode.INVALID_REQUIRED_ACKS if acks not in (-1, 0, 1) else ErrorCode.NONE
    pending = _Pending()
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
            # Cluster mode: only the partition's leader appends, and acks=all needs
            # min.insync.replicas in the ISR (single node: always NONE).
            placed = (routing.leader_error(topic.name, data.index)
                      or routing.produce_error(topic.name, data.index, acks))
            if placed:
                partitions.append(PartitionResponse(index=data.index, error_code=placed, base_offset=-1))
                continue
            # The decoder hands records over as a writable view of the request frame.
            records = cast("memoryview | None", data.records)
            txn_error = transactional_produce_error(broker, request.transactional_id,
                                                    topic.name, data.index, records)
            if txn_error:
                partitions.append(PartitionResponse(index=data.index, error_code=txn_error, base_offset=-1))
                continue
            # acks=0: appended before the connection's next request is read, as Kafka does.
            result = broker.storage.append(topic.name, data.index, records, header.api_version,
                                           defer_io=acks != 0)
            partition = _partition_response(data.index, result)
            partitions.append(partition)
            if result.deferred is not None:  # validated off the event loop: filled in later
                pending.deferred.append((partition, topic.name, records, result.deferred))
            else:
                pending.track(broker, acks, topic.name, partition, records, result)
        topics.append(ProduceResponse.TopicProduceResponse(name=topic.name, partition_responses=partitions))
    if acks == 0:
        return _acks0_outcome(topics, pending)
    response = ProduceResponse(responses=topics, throttle_time_ms=0)
    if not (pending.deferred or pending.waits or pending.replicated):
        return response
    return _complete(broker, acks, response, pending, request.timeout_ms / 1000)


def _acks0_outcome(topics: list[ProduceResponse.TopicProduceResponse], pending: _Pending) -> (
        CloseConnection | Awaitable[CloseConnection | None] | None):
    """No response for acks=0, unless a partition failed: then the connection closes.
    Batches validated off the event loop are waited for only to learn their errors (no
    fsync or replica wait: acks=0 waits for neither)."""
    if pending.deferred:
        return _acks0_after_validation(topics, pending)
    return _close_if_failed(topics)


async def _acks0_after_validation(topics: list[ProduceResponse.TopicProduceResponse],
                                  pending: _Pending) -> CloseConnection | None:
    for partition, _topic, _records, deferred in pending.deferred:
        partition.error_code = (await deferred).error
    return _close_if_failed(topics)


def _close_if_failed(topics: list[ProduceResponse.TopicProduceResponse]) -> CloseConnection | None:
    failed = [f"{topic.name}-{p.index}: {ErrorCode(p.error_code).name}"
              for topic in topics for p in topic.partition_responses if p.error_code]
    if not failed:
        return None
    return CloseConnection("error during produce with acks=0 (" + ", ".join(failed) + ")")


@dataclass
class _Pending:
    """What the answer still waits for: validation off the loop, fsyncs, and (cluster
    mode, acks=all) the in-sync replicas."""

    deferred: list[tuple[PartitionResponse, str, memoryview | None, Awaitable[AppendResult]]] = \
        field(default_factory=list)
    waits: list[Awaitable[None]] = field(default_factory=list)
    replicated: list[tuple[PartitionResponse, Awaitable[int]]] = field(default_factory=list)

    def track(self, broker: BrokerServices, acks: int, topic: str, partition: PartitionResponse,
              records: memoryview | None, result: AppendResult) -> None:
        if result.wait is not None:
            self.waits.append(result.wait)
        if result.error != ErrorCode.NONE or records is None or not broker.routing.replicated:
            return
        end = result.base_offset + parse_header(records).last_offset_delta + 1
        replicated = broker.routing.appended(topic, partition.index, end, acks)
        if replicated is not None:
            self.replicated.append((partition, replicated))


def _transactional_id_denied(broker: BrokerServices, request: ProduceRequest) -> int:
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
        error_message=result.message,
        # KIP-467 (v8+): which records made the batch INVALID_RECORD
        record_errors=[RecordError(batch_index=i, batch_index_error_message=message)
                       for i, message in result.record_errors])


async def _complete(broker: BrokerServices, acks: int, response: ProduceResponse, pending: _Pending,
                    timeout_s: float) -> ProduceResponse:
    for partition, topic, records, deferred in pending.deferred:
        result = await deferred
        filled = _partition_response(partition.index, result)
        partition.error_code = filled.error_code
        partition.base_offset = filled.base_offset
        partition.log_append_time_ms = filled.log_append_time_ms
        partition.log_start_offset = filled.log_start_offset
        partition.error_message = filled.error_message
        partition.record_errors = filled.record_errors
        pending.track(broker, acks, topic, partition, records, result)
    if pending.waits:
        await _after_fsync(response, pending.waits)
    if pending.replicated:
        await _after_replication(pending.replicated, timeout_s)
    return response


async def _after_fsync(response: ProduceResponse, waits: list[Awaitable[None]]) -> None:
    results = await asyncio.gather(*waits, return_exceptions=True)
    if any(isinstance(result, BaseException) for result in results):
        for topic in response.responses:
            for partition in topic.partition_responses:
                if partition.error_code == ErrorCode.NONE:
                    partition.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                    partition.error_message = "write or fsync failed"


async def _after_replication(replicated: list[tuple[PartitionResponse, Awaitable[int]]],
                             timeout_s: float) -> None:
    """acks=all: each partition's error once its ISR has the batch, REQUEST_TIMED_OUT
    when that takes longer than the request's timeout (Kafka's delayed produce)."""
    tasks = [asyncio.ensure_future(waiting) for _, waiting in replicated]
    done, _ = await asyncio.wait(tasks, timeout=max(timeout_s, 0.001))
    for (partition, _), task in zip(replicated, tasks, strict=True):
        error: int
        if task not in done:
            task.cancel()
            error = ErrorCode.REQUEST_TIMED_OUT
        elif task.exception() is not None:
            error = ErrorCode.UNKNOWN_SERVER_ERROR
        else:
            error = task.result()
        if error != ErrorCode.NONE and partition.error_code == ErrorCode.NONE:
            partition.error_code = error
            partition.error_message = f"not replicated: {ErrorCode(error).name}"
