"""ListOffsets: earliest (-2), latest (-1), max timestamp (-3, v7), earliest local (-4, v8:
the log start, everything is local here), latest tiered (-5, v9: -1, as Kafka answers
for a topic without remote storage) or first offset at a time. v10's TimeoutMs bounds
remote lookups, which never happen here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import ListOffsetsRequest, ListOffsetsResponse
from logserver.security import checks
from logserver.storage.api import EARLIEST, LATEST, MAX_TIMESTAMP

if TYPE_CHECKING:
    from logserver.services import BrokerServices

__all__ = ["EARLIEST", "LATEST", "MAX_TIMESTAMP", "handle"]

MAX_TIMESTAMP_MIN_VERSION = 7
EARLIEST_LOCAL, EARLIEST_LOCAL_MIN_VERSION = -4, 8  # KIP-405
LATEST_TIERED, LATEST_TIERED_MIN_VERSION = -5, 9  # KIP-1005
_NOT_SPECIAL = -6  # a negative timestamp the request's version gives no meaning
READ_COMMITTED = 1  # isolation_level (v2+; 0 before)
CONSUMER = -1  # replica_id of a client's request (Kafka's isolation-level check applies)
PartitionResponse = ListOffsetsResponse.ListOffsetsPartitionResponse


def handle(broker: BrokerServices, header: RequestHeader, request: ListOffsetsRequest) -> ListOffsetsResponse:
    storage = broker.storage
    routing = broker.routing
    topics = []
    for topic in request.topics:
        results = []
        refused = checks.denied(broker, checks.LIST_OFFSETS, topic.name)
        for wanted in topic.partitions:
            if refused:
                results.append(PartitionResponse(partition_index=wanted.partition_index,
                                                 error_code=refused, timestamp=-1, offset=-1))
                continue
            # Cluster mode: the partition's leader answers, at the client's leader epoch.
            placed = routing.leader_error(topic.name, wanted.partition_index,
                                          wanted.current_leader_epoch)
            if placed:
                results.append(PartitionResponse(partition_index=wanted.partition_index,
                                                 error_code=placed, timestamp=-1, offset=-1))
                continue
            # KIP-207: a new leader whose high watermark has not reached its epoch's
            # start refuses "latest" (and lookups past its high watermark) to clients.
            lagging = request.replica_id == CONSUMER and routing.high_watermark_lagging(
                topic.name, wanted.partition_index)
            timestamp = wanted.timestamp
            if timestamp == LATEST and lagging:
                results.append(_not_available(wanted.partition_index))
                continue
            if timestamp == MAX_TIMESTAMP and header.api_version < MAX_TIMESTAMP_MIN_VERSION:
                timestamp = _NOT_SPECIAL  # not a special value before v7: refused like any negative
            timestamp = _tiered_storage_timestamp(timestamp, header.api_version)
            listed = storage.list_offset(topic.name, wanted.partition_index,
                                         EARLIEST if timestamp == LATEST_TIERED else timestamp)
            if timestamp == LATEST_TIERED and listed.error == ErrorCode.NONE:
                results.append(PartitionResponse(  # nothing is tiered: Kafka's answer
                    partition_index=wanted.partition_index, error_code=ErrorCode.NONE,
                    timestamp=-1, offset=-1, leader_epoch=-1))
                continue
            if (timestamp == LATEST and listed.error == ErrorCode.NONE
                    and request.isolation_level == READ_COMMITTED):
                stable = storage.last_stable_offset(topic.name, wanted.partition_index)
                listed = listed._replace(offset=listed.offset if stable is None else stable)
            if listed.error != ErrorCode.NONE:
                results.append(PartitionResponse(
                    partition_index=wanted.partition_index, error_code=listed.error,
                    timestamp=-1, offset=-1))
                continue
            if timestamp not in (LATEST, EARLIEST) and listed.offset >= 0 and \
                    listed.offset >= (storage.high_watermark(topic.name, wanted.partition_index) or 0):
                # A record a replica may not have yet (cluster mode): consumers never see it.
                listed = listed._replace(offset=-1, timestamp=-1)
            if timestamp >= 0 and listed.offset < 0 and lagging:  # none below a lagging HW
                results.append(_not_available(wanted.partition_index))
                continue
            results.append(PartitionResponse(
                partition_index=wanted.partition_index, error_code=ErrorCode.NONE,
                timestamp=listed.timestamp, offset=listed.offset,
                leader_epoch=routing.leader_epoch(topic.name, wanted.partition_index)))
        topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=topic.name, partitions=results))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


def _not_available(partition: int) -> PartitionResponse:
    return PartitionResponse(partition_index=partition, error_code=ErrorCode.OFFSET_NOT_AVAILABLE,
                             timestamp=-1, offset=-1)


def _tiered_storage_timestamp(timestamp: int, version: int) -> int:
    """KIP-405's special timestamps: earliest local is the log start (no tiered storage);
    latest tiered stays (answered above); before their versions they mean nothing."""
    if timestamp == EARLIEST_LOCAL:
        return EARLIEST if version >= EARLIEST_LOCAL_MIN_VERSION else _NOT_SPECIAL
    if timestamp == LATEST_TIERED and version < LATEST_TIERED_MIN_VERSION:
        return _NOT_SPECIAL
    return timestamp
