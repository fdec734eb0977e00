"""OffsetForLeaderEpoch as a cluster member serves it (followers ask it before fetching,
KIP-101/KIP-279). Produce, Fetch and ListOffsets are the single-node handlers in both
modes (logserver/handlers/), asking ``broker.routing``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import RequestHeader
from kafkaproto.messages import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from logserver.cluster.epochs import UNDEFINED, end_offset_for_epoch
from logserver.cluster.routing import node_of

if TYPE_CHECKING:
    from logserver.broker import Broker


# -- OffsetForLeaderEpoch (internal: followers ask it before fetching) ------------------------

def offset_for_leader_epoch(broker: Broker, header: RequestHeader,
                            request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    node = node_of(broker)
    topics = []
    for topic in request.topics:
        results = []
        for wanted in topic.partitions:
            error = broker.routing.leader_error(topic.topic, wanted.partition, wanted.current_leader_epoch)
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
