"""ListOffsets: earliest (-2), latest (-1), max timestamp (-3, v7) or first offset at a time."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import ListOffsetsRequest, ListOffsetsResponse

if TYPE_CHECKING:
    from logserver.broker import Broker

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
PartitionResponse = ListOffsetsResponse.ListOffsetsPartitionResponse


def handle(broker: Broker, header: RequestHeader, request: ListOffsetsRequest) -> ListOffsetsResponse:
    topics = []
    for topic in request.topics:
        results = []
        for wanted in topic.partitions:
            partition = broker.get_partition(topic.name, wanted.partition_index)
            if partition is None:
                results.append(PartitionResponse(
                    partition_index=wanted.partition_index,
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, timestamp=-1, offset=-1))
                continue
            if wanted.timestamp == LATEST:
                found: tuple[int, int] | None = (partition.high_watermark, -1)
            elif wanted.timestamp == EARLIEST:
                found = (partition.log_start_offset, -1)
            elif wanted.timestamp == MAX_TIMESTAMP and header.api_version >= 7:
                found = partition.max_timestamp_offset()
            elif wanted.timestamp < 0:
                results.append(PartitionResponse(
                    partition_index=wanted.partition_index, error_code=ErrorCode.INVALID_REQUEST,
                    timestamp=-1, offset=-1))
                continue
            else:
                found = partition.offset_for_timestamp(wanted.timestamp)
            offset, timestamp = found if found is not None else (-1, -1)
            results.append(PartitionResponse(
                partition_index=wanted.partition_index, error_code=ErrorCode.NONE,
                timestamp=timestamp, offset=offset, leader_epoch=partition.leader_epoch))
        topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=topic.name, partitions=results))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
