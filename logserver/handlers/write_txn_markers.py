"""WriteTxnMarkers (v0-1): write commit/abort markers into partitions of this node.

The transaction coordinator writes its markers in-process; over the wire this serves the
admin abort of a hanging transaction (Kafka's ``kafka-transactions.sh abort``, the admin
clients' ``abortTransaction``): an abort marker for a producer whose transaction a
partition still holds open. A marker older than the producer's current epoch at the
partition is refused (INVALID_PRODUCER_EPOCH), as Kafka's leader does. Only principals with CLUSTER_ACTION on
the cluster (brokers, admins) may write markers; everyone else gets
CLUSTER_AUTHORIZATION_FAILED for every partition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from logserver.groups import INTERNAL_TOPICS
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.broker import Broker

Result = WriteTxnMarkersResponse.WritableTxnMarkerResult
TopicResult = WriteTxnMarkersResponse.WritableTxnMarkerTopicResult
PartitionResult = WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult


def _write(broker: Broker, marker: WriteTxnMarkersRequest.WritableTxnMarker, topic: str,
           partition: int) -> int:
    storage = broker.storage
    if topic in INTERNAL_TOPICS:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    producers = storage.active_producers(topic, partition)
    if producers is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    current = next((epoch for pid, epoch, *_ in producers if pid == marker.producer_id), -1)
    if marker.producer_epoch < current:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    result = storage.write_txn_marker(topic, partition, marker.producer_id, marker.producer_epoch,
                                      commit=marker.transaction_result,
                                      coordinator_epoch=marker.coordinator_epoch)
    return result.error


def handle(broker: Broker, header: RequestHeader,
           request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    refused = checks.denied(broker, checks.WRITE_TXN_MARKERS)
    return WriteTxnMarkersResponse(markers=[
        Result(producer_id=marker.producer_id, topics=[
            TopicResult(name=topic.name, partitions=[
                PartitionResult(partition_index=p, error_code=refused or _write(broker, marker, topic.name, p))
                for p in topic.partition_indexes])
            for topic in marker.topics])
        for marker in request.markers])
