"""ListOffsets: earliest (-2), latest (-1), max timestamp (-3, v7) or first offset at a time."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import ListOffsetsRequest, ListOffsetsResponse
from logserver.security import checks
from logserver.storage.api import EARLIEST, LATEST, MAX_TIMESTAMP

if TYPE_CHECKING:
    from logserver.broker import Broker

__all__ = ["EARLIEST", "LATEST", "MAX_TIMESTAMP", "handle"]

MAX_TIMESTAMP_MIN_VERSION = 7
READ_COMMITTED = 1  # isolation_level (v2+; 0 before)
PartitionResponse = ListOffsetsResponse.ListOffsetsPartitionResponse


def handle(broker: Broker, header: RequestHeader, request: ListOffsetsRequest) -> ListOffsetsResponse:
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
            timestamp = wanted.timestamp
            if timestamp == MAX_TIMESTAMP and header.api_version < MAX_TIMESTAMP_MIN_VERSION:
                timestamp = -4  # not a special value before v7: refused like any negative
            listed = storage.list_offset(topic.name, wanted.partition_index, timestamp)
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
            results.append(PartitionResponse(
                partition_index=wanted.partition_index, error_code=ErrorCode.NONE,
                timestamp=listed.timestamp, offset=listed.offset,
                leader_epoch=routing.leader_epoch(topic.name, wanted.partition_index)))
        topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=topic.name, partitions=results))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
