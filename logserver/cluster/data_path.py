"""Produce, Fetch, ListOffsets and OffsetForLeaderEpoch as a cluster member serves them.

Only the partition's leader answers (NOT_LEADER_OR_FOLLOWER elsewhere, FENCED_LEADER_EPOCH
for an older epoch); acks=all waits for the high watermark; consumers never read above
it, follower replicas (Fetch with a replica id) read to the log end."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, cast

from kafkaproto import ErrorCode, FileRegion, RequestHeader
from kafkaproto.batch import parse_header
from kafkaproto.messages import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    ProduceRequest,
    ProduceResponse,
)
from logserver.cluster.epochs import UNDEFINED, end_offset_for_epoch
from logserver.cluster.routing import leader_error, node_of
from logserver.groups import INTERNAL_TOPICS
from logserver.handlers.fetch import TOPIC_ID_VERSION
from logserver.storage.api import MAX_TIMESTAMP
from logserver.transactions.produce_check import is_transactional

if TYPE_CHECKING:
    from logserver.broker import Broker
    from logserver.cluster.node import ClusterNode


log = logging.getLogger(__name__)


PartitionResponse = ProduceResponse.PartitionProduceResponse
PartitionData = FetchResponse.PartitionData


# -- Produce ----------------------------------------------------------------------------------

def produce(broker: Broker, header: RequestHeader, request: ProduceRequest) -> (
        ProduceResponse | Awaitable[ProduceResponse] | None):
    node = node_of(broker)
    acks = request.acks
    # Transactions are not served in cluster mode; a transactional batch without a
    # transactional id is refused whole as Kafka refuses it (KafkaApis.handleProduceRequest).
    if request.transactional_id is not None or any(
            is_transactional(cast("memoryview | None", data.records))
            for topic in request.topic_data for data in topic.partition_data):
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif acks not in (-1, 0, 1):
        error = ErrorCode.INVALID_REQUIRED_ACKS
    else:
        error = ErrorCode.NONE
    waits: list[tuple[PartitionResponse, tuple[str, int], Awaitable[Any]]] = []
    topics = []
    for topic in request.topic_data:
        partitions = []
        for data in topic.partition_data:
            where = (topic.name, data.index)
            refused = error or leader_error(node, *where)
            state = node.model.partition(*where)
            if not refused and topic.name in INTERNAL_TOPICS:
                refused = ErrorCode.INVALID_TOPIC_EXCEPTION
            if not refused and acks == -1 and state is not None and len(state.isr) < node.min_isr:
                refused = ErrorCode.NOT_ENOUGH_REPLICAS
            if refused:
                partitions.append(PartitionResponse(index=data.index, error_code=refused, base_offset=-1))
                continue
            records = cast("memoryview | None", data.records)
            result = broker.storage.append(topic.name, data.index, records, header.api_version)
            response = PartitionResponse(
                index=data.index, error_code=result.error, base_offset=result.base_offset,
                log_append_time_ms=result.log_append_time, log_start_offset=result.log_start_offset,
                error_message=result.message)
            partitions.append(response)
            if result.error != ErrorCode.NONE or records is None:
                continue
            node.advance(where)
            if result.wait is not None:
                waits.append((response, where, result.wait))
            if acks == -1:
                end = result.base_offset + parse_header(records).last_offset_delta + 1
                waits.append((response, where, node.leaders[where].wait_for(end)))
        topics.append(ProduceResponse.TopicProduceResponse(name=topic.name, partition_responses=partitions))
    if acks == 0:
        return None
    answer = ProduceResponse(responses=topics, throttle_time_ms=0)
    if not waits:
        return answer
    return _after_waits(node, answer, waits, request.timeout_ms / 1000)


async def _after_waits(node: ClusterNode, answer: ProduceResponse,
                       waits: list[tuple[PartitionResponse, tuple[str, int], Awaitable[Any]]],
                       timeout_s: float) -> ProduceResponse:
    tasks = [asyncio.ensure_future(w) for _, _, w in waits]
    done, _ = await asyncio.wait(tasks, timeout=max(timeout_s, 0.001))
    for (response, where, _), task in zip(waits, tasks, strict=True):
        if response.error_code != ErrorCode.NONE:
            continue
        if task not in done:
            task.cancel()
            response.error_code = ErrorCode.REQUEST_TIMED_OUT
        elif task.exception() is not None:
            response.error_code = ErrorCode.KAFKA_STORAGE_ERROR  # fsync failed
        elif isinstance(task.result(), int) and task.result() != ErrorCode.NONE:
            response.error_code = task.result()
        else:
            state = node.model.partition(*where)
            if state is not None and len(state.isr) < node.min_isr and isinstance(task.result(), int):
                response.error_code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    return answer


# -- Fetch ------------------------------------------------------------------------------------

def fetch(broker: Broker, header: RequestHeader, request: FetchRequest) -> (
        FetchResponse | Awaitable[FetchResponse]):
    if request.session_id != 0:
        return FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[])
    node = node_of(broker)
    if request.replica_id >= 0:
        for topic in request.topics:
            name = _topic_name(node, topic, header.api_version)
            for wanted in topic.partitions:
                if name is not None:
                    node.follower_fetched((name, wanted.partition), request.replica_id,
                                          wanted.fetch_offset)
    response, size, waitable = _build(node, request, header.api_version)
    if size >= request.min_bytes or request.max_wait_ms <= 0 or not waitable:
        return response
    return _long_poll(node, request, header.api_version, waitable)


async def _long_poll(node: ClusterNode, request: FetchRequest, version: int,
                     partitions: list[tuple[str, int]]) -> FetchResponse:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + request.max_wait_ms / 1000
    while True:
        await node.storage.wait_for_append(partitions, deadline - loop.time())
        response, size, partitions = _build(node, request, version)
        if size >= request.min_bytes or loop.time() >= deadline or not partitions:
            return response
        for topic in response.responses:
            for partition in topic.partitions:
                if isinstance(partition.records, FileRegion):
                    partition.records.release()


def _epoch_error(node: ClusterNode, topic: str, index: int, current_epoch: int) -> int:
    error = leader_error(node, topic, index)
    state = node.model.partition(topic, index)
    if error or state is None or current_epoch < 0:
        return error
    if current_epoch < state.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if current_epoch > state.leader_epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.NONE


def _topic_name(node: ClusterNode, topic: FetchRequest.FetchTopic, version: int) -> str | None:
    """As sent before Fetch v13; from v13 on (KIP-516) the topic the cluster knows by its id."""
    if version < TOPIC_ID_VERSION:
        return topic.topic
    return next((name for name, record in node.model.topics.items()
                 if record.topic_id == topic.topic_id), None)


def _build(node: ClusterNode, request: FetchRequest, version: int) -> (
        tuple[FetchResponse, int, list[tuple[str, int]]]):
    storage = node.storage
    replica = request.replica_id >= 0
    budget = request.max_bytes if version >= 3 else 2**31 - 1
    total = 0
    waitable: list[tuple[str, int]] = []
    topics = []
    for topic in request.topics:
        name = _topic_name(node, topic, version)
        if name is None:  # v13+: an id no topic of the cluster has
            topics.append(FetchResponse.FetchableTopicResponse(
                topic="", topic_id=topic.topic_id, partitions=[PartitionData(
                    partition_index=wanted.partition, error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                    high_watermark=-1, last_stable_offset=-1, log_start_offset=-1,
                    aborted_transactions=[], records=b"") for wanted in topic.partitions]))
            continue
        results = []
        for wanted in topic.partitions:
            error = _epoch_error(node, name, wanted.partition, wanted.current_leader_epoch)
            if error:
                results.append(PartitionData(
                    partition_index=wanted.partition, error_code=error, high_watermark=-1,
                    last_stable_offset=-1, log_start_offset=-1, aborted_transactions=[], records=b""))
                continue
            limit = max(0, min(wanted.partition_max_bytes, budget - total))
            read = storage.read(name, wanted.partition, wanted.fetch_offset, limit,
                                min_one=total == 0, fetch_version=version, replica=replica)
            if read.error == ErrorCode.NONE:
                waitable.append((name, wanted.partition))
            total += read.size
            results.append(PartitionData(
                partition_index=wanted.partition, error_code=read.error,
                high_watermark=read.high_watermark, last_stable_offset=read.high_watermark,
                log_start_offset=read.log_start_offset, aborted_transactions=[],
                preferred_read_replica=-1, records=read.records))
        topics.append(FetchResponse.FetchableTopicResponse(topic=name, topic_id=topic.topic_id,
                                                           partitions=results))
    return (FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=topics),
            total, waitable)


# -- ListOffsets ------------------------------------------------------------------------------

def list_offsets(broker: Broker, header: RequestHeader,
                 request: ListOffsetsRequest) -> ListOffsetsResponse:
    """Answered by the partition's leader only, and never beyond the high watermark."""
    node = node_of(broker)
    topics = []
    for topic in request.topics:
        results = []
        for wanted in topic.partitions:
            where = (topic.name, wanted.partition_index)
            error = _epoch_error(node, *where, wanted.current_leader_epoch)
            timestamp = wanted.timestamp
            if timestamp == MAX_TIMESTAMP and header.api_version < 7:
                timestamp = -4  # not a special value before v7: refused like any negative
            listed = None if error else node.storage.list_offset(*where, timestamp)
            if listed is None or listed.error != ErrorCode.NONE:
                results.append(ListOffsetsResponse.ListOffsetsPartitionResponse(
                    partition_index=wanted.partition_index,
                    error_code=error or (listed.error if listed else ErrorCode.UNKNOWN_SERVER_ERROR),
                    timestamp=-1, offset=-1))
                continue
            hw = node.storage.high_watermark(*where)
            offset, stamp = listed.offset, listed.timestamp
            if hw is not None and offset > hw:
                offset, stamp = -1, -1
            state = node.model.partition(*where)
            results.append(ListOffsetsResponse.ListOffsetsPartitionResponse(
                partition_index=wanted.partition_index, error_code=ErrorCode.NONE,
                timestamp=stamp, offset=offset,
                leader_epoch=state.leader_epoch if state is not None else -1))
        topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=topic.name, partitions=results))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


# -- OffsetForLeaderEpoch (internal: followers ask it before fetching) ------------------------

def offset_for_leader_epoch(broker: Broker, header: RequestHeader,
                            request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    node = node_of(broker)
    topics = []
    for topic in request.topics:
        results = []
        for wanted in topic.partitions:
            error = _epoch_error(node, topic.topic, wanted.partition, wanted.current_leader_epoch)
            epoch, end = UNDEFINED
            if not error:
                state = node.model.partition(topic.topic, wanted.partition)
                assert state is not None
                if wanted.leader_epoch == state.leader_epoch:
                    epoch = state.leader_epoch
                    end = node.storage.log_end_offset(topic.topic, wanted.partition) or 0
                elif wanted.leader_epoch < state.leader_epoch:
                    epoch, end = end_offset_for_epoch(node.storage, topic.topic, wanted.partition,
                                                      wanted.leader_epoch)
            results.append(OffsetForLeaderEpochResponse.EpochEndOffset(
                error_code=error, partition=wanted.partition, leader_epoch=epoch, end_offset=end))
        topics.append(OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(
            topic=topic.topic, partitions=results))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
