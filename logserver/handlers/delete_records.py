"""DeleteRecords: move partitions' log start offsets forward (Kafka's "truncate a topic").

Offset -1 means the high watermark. Consumers below the new start get
OFFSET_OUT_OF_RANGE and apply their reset policy. The new start is persisted before the
answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import DeleteRecordsRequest, DeleteRecordsResponse
from logserver.internal_topics import INTERNAL_TOPICS
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.services import BrokerServices

TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionResult = DeleteRecordsResponse.DeleteRecordsPartitionResult


async def handle(broker: BrokerServices, header: RequestHeader,
                 request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    topics = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            error: int
            low: int
            refused = checks.denied(broker, checks.DELETE_RECORDS, topic.name)
            if refused:
                error, low = refused, -1
            elif topic.name in INTERNAL_TOPICS:
                error, low = ErrorCode.INVALID_TOPIC_EXCEPTION, -1  # Kafka refuses these too
            elif placed := broker.routing.leader_error(topic.name, wanted.partition_index):
                error, low = placed, -1  # cluster mode: the leader moves it; followers follow
            else:
                error, low = await broker.storage.delete_records(topic.name, wanted.partition_index,
                                                                 wanted.offset)
            partitions.append(PartitionResult(partition_index=wanted.partition_index,
                                              low_watermark=low, error_code=error))
        topics.append(TopicResult(name=topic.name, partitions=partitions))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
