"""DescribeProducers (v0): the idempotent and transactional producers each partition
tracks, with the first offset of a producer's open transaction (kafka-transactions.sh
find-hanging) and the coordinator epoch of its last marker (which
``kafka-transactions.sh abort`` sends back in its WriteTxnMarkers). Needs READ on each
topic (TOPIC_AUTHORIZATION_FAILED), as in Kafka."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import DescribeProducersRequest, DescribeProducersResponse
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.services import BrokerServices

Topic = DescribeProducersResponse.TopicResponse
Partition = DescribeProducersResponse.PartitionResponse
Producer = DescribeProducersResponse.ProducerState


def handle(broker: BrokerServices, header: RequestHeader,
           request: DescribeProducersRequest) -> DescribeProducersResponse:
    topics = []
    for topic in request.topics:
        partitions = []
        refused = checks.denied(broker, checks.DESCRIBE_PRODUCERS, topic.name)
        for index in topic.partition_indexes:
            producers = None if refused else broker.storage.active_producers(topic.name, index)
            if producers is None:
                partitions.append(Partition(partition_index=index,
                                            error_code=refused or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                            active_producers=[]))
                continue
            partitions.append(Partition(partition_index=index, error_code=ErrorCode.NONE,
                                        active_producers=[
                Producer(producer_id=pid, producer_epoch=epoch, last_sequence=seq,
                         last_timestamp=ts, coordinator_epoch=coordinator_epoch,
                         current_txn_start_offset=start)
                for pid, epoch, seq, ts, start, coordinator_epoch in producers]))
        topics.append(Topic(name=topic.name, partitions=partitions))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)
