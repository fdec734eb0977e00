"""DescribeLogDirs: the data directory, and the size of each (requested) partition in it.

Offset lag is 0: each partition has one replica, the current one (Kafka reports a lag
only for a future replica being moved between directories).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import DescribeLogDirsRequest, DescribeLogDirsResponse
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.services import BrokerServices

Result = DescribeLogDirsResponse.DescribeLogDirsResult
Topic = DescribeLogDirsResponse.DescribeLogDirsTopic
PartitionEntry = DescribeLogDirsResponse.DescribeLogDirsPartition


def handle(broker: BrokerServices, header: RequestHeader,
           request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    refused = checks.denied(broker, checks.DESCRIBE_LOG_DIRS)
    if refused:
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=refused, results=[])
    wanted: set[tuple[str, int]] | None = None
    if request.topics is not None:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    results = []
    for log_dir in broker.storage.log_dirs():
        by_topic: dict[str, list[PartitionEntry]] = defaultdict(list)
        for part in log_dir.partitions:
            if wanted is None or (part.topic, part.partition) in wanted:
                by_topic[part.topic].append(PartitionEntry(
                    partition_index=part.partition, partition_size=part.size,
                    offset_lag=part.offset_lag, is_future_key=False))
        results.append(Result(
            error_code=ErrorCode.NONE, log_dir=log_dir.path,
            topics=[Topic(name=name, partitions=entries) for name, entries in sorted(by_topic.items())],
            total_bytes=log_dir.total_bytes, usable_bytes=log_dir.usable_bytes))
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, results=results)
