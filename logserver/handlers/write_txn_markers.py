"""WriteTxnMarkers (v0-1): write commit/abort markers into partitions of this node.

On a single node the transaction coordinator writes its markers in-process; in cluster
mode it sends them here, to each partition's leader (answered once durable and in the
in-sync replicas, like Kafka's acks=all marker appends). Over the wire this also serves the
admin abort of a hanging transaction (Kafka's ``kafka-transactions.sh abort``, the admin
clients' ``abortTransaction``): an abort marker for a producer whose transaction a
partition still holds open. A marker in a ``__consumer_offsets`` partition also
completes the TxnOffsetCommit offsets the group coordinator holds for the producer
(Kafka's onTransactionCompleted), once durable; while that partition's groups are being
loaded it is refused with COORDINATOR_LOAD_IN_PROGRESS, and the coordinator retries. A marker older than the producer's current epoch at the
partition is refused (INVALID_PRODUCER_EPOCH), as Kafka's leader does, and one whose
coordinator epoch is older than the producer's last marker's at the partition
(TRANSACTION_COORDINATOR_FENCED, checked in ``Partition.append_marker``): a coordinator
that lost its ``__transaction_state`` partition cannot end the transaction any more.
Only principals with CLUSTER_ACTION on
the cluster (brokers, admins) may write markers; everyone else gets
CLUSTER_AUTHORIZATION_FAILED for every partition.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from logserver.internal_topics import OFFSETS_TOPIC, TXN_STATE_TOPIC
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.services import BrokerServices

Result = WriteTxnMarkersResponse.WritableTxnMarkerResult
TopicResult = WriteTxnMarkersResponse.WritableTxnMarkerTopicResult
PartitionResult = WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult


MARKER_ACKS = -1  # Kafka's leader appends markers with acks=all
MARKER_TIMEOUT_S = 30.0
# a marker in a __consumer_offsets partition, once written: (partition, producer, commit)
Completion = tuple[PartitionResult, int, int, bool]


def _write(broker: BrokerServices, marker: WriteTxnMarkersRequest.WritableTxnMarker, topic: str,
           partition: int, waits: list[tuple[PartitionResult, Awaitable[Any]]],
           result_of: PartitionResult, completions: list[Completion]) -> int:
    storage = broker.storage
    if topic == TXN_STATE_TOPIC:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    placed = broker.routing.leader_error(topic, partition)  # cluster mode: the leader writes
    if placed:
        return placed
    if topic == OFFSETS_TOPIC:  # the group coordinator completes the offsets it holds
        loading = broker.groups.marker_status(partition)
        if loading is not None:
            return loading
    producers = storage.active_producers(topic, partition)
    if producers is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    current = next((epoch for pid, epoch, *_ in producers if pid == marker.producer_id), -1)
    if marker.producer_epoch < current:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    result = storage.write_txn_marker(topic, partition, marker.producer_id, marker.producer_epoch,
                                      commit=marker.transaction_result,
                                      coordinator_epoch=marker.coordinator_epoch)
    if result.error == ErrorCode.NONE:
        if result.wait is not None:
            waits.append((result_of, result.wait))
        replicated = broker.routing.appended(topic, partition, result.base_offset + 1, MARKER_ACKS)
        if replicated is not None:
            waits.append((result_of, replicated))
        if topic == OFFSETS_TOPIC:
            completions.append((result_of, partition, marker.producer_id,
                                marker.transaction_result))
    return result.error


def handle(broker: BrokerServices, header: RequestHeader, request: WriteTxnMarkersRequest) -> (
        WriteTxnMarkersResponse | Awaitable[WriteTxnMarkersResponse]):
    refused = checks.denied(broker, checks.WRITE_TXN_MARKERS)
    waits: list[tuple[PartitionResult, Awaitable[Any]]] = []
    completions: list[Completion] = []
    markers = []
    for marker in request.markers:
        topics = []
        for topic in marker.topics:
            partitions = []
            for p in topic.partition_indexes:
                result = PartitionResult(partition_index=p, error_code=ErrorCode.NONE)
                result.error_code = refused or _write(broker, marker, topic.name, p, waits, result,
                                                      completions)
                partitions.append(result)
            topics.append(TopicResult(name=topic.name, partitions=partitions))
        markers.append(Result(producer_id=marker.producer_id, topics=topics))
    response = WriteTxnMarkersResponse(markers=markers)
    if not waits:
        _complete(broker, completions)
        return response
    return _after_waits(broker, response, waits, completions)


def _complete(broker: BrokerServices, completions: list[Completion]) -> None:
    """Markers durable in ``__consumer_offsets``: the group coordinator makes the
    transaction's offsets visible or drops them (a marker that failed is retried by the
    transaction coordinator; a new leader replays the partition meanwhile)."""
    for result, partition, producer_id, commit in completions:
        if result.error_code == ErrorCode.NONE:
            broker.groups.complete_txn(partition, producer_id, commit=commit)


async def _after_waits(broker: BrokerServices, response: WriteTxnMarkersResponse,
                       waits: list[tuple[PartitionResult, Awaitable[Any]]],
                       completions: list[Completion]) -> WriteTxnMarkersResponse:
    """Answered once each marker is durable (fsync) and, in cluster mode, in the ISR."""
    tasks = [asyncio.ensure_future(waiting) for _, waiting in waits]
    done, _ = await asyncio.wait(tasks, timeout=MARKER_TIMEOUT_S)
    for (result, _), task in zip(waits, tasks, strict=True):
        error: int
        if task not in done:
            task.cancel()
            error = ErrorCode.REQUEST_TIMED_OUT
        elif task.exception() is not None:
            error = ErrorCode.KAFKA_STORAGE_ERROR
        else:
            outcome = task.result()
            error = outcome if isinstance(outcome, int) else ErrorCode.NONE
        if error != ErrorCode.NONE and result.error_code == ErrorCode.NONE:
            result.error_code = error
    _complete(broker, completions)
    return response
