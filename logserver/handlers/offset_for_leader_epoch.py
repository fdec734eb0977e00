"""OffsetForLeaderEpoch: where a leader epoch ends on this partition's leader.

Followers ask it before fetching (KIP-101/KIP-279: cut a divergent tail); consumers ask it
after a leader change (KIP-320: was the record they are positioned after truncated away?).
The answer for epoch E is the largest epoch <= E the log has and the offset where it ends
(the first offset of a later epoch), or the log end offset when E is the current epoch;
an epoch above the current one has no answer (-1, -1). Epochs are read back from the
batches' headers (logserver.cluster.epochs). Served in both modes, with the same checks
as ListOffsets: NOT_LEADER_OR_FOLLOWER off the leader, FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH for an older / newer ``current_leader_epoch``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from logserver.cluster.epochs import UNDEFINED, end_offset_for_epoch
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.services import BrokerServices
    from logserver.storage.api import Storage

EpochEndOffset = OffsetForLeaderEpochResponse.EpochEndOffset
CONSUMER_REPLICA_ID = -1  # v3+: a consumer; v0-v2 carry no replica id (-2, "debugging")


def handle(broker: BrokerServices, header: RequestHeader,
           request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    all_topics = checks.allowed(broker, checks.OFFSET_FOR_LEADER_EPOCH_CLUSTER)
    replica = request.replica_id >= 0
    topics = []
    for topic in request.topics:
        refused = ErrorCode.NONE if all_topics else \
            checks.denied(broker, checks.OFFSET_FOR_LEADER_EPOCH_TOPIC, topic.topic)
        results = [_partition(broker, topic.topic, wanted, refused, replica)
                   for wanted in topic.partitions]
        topics.append(OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(
            topic=topic.topic, partitions=results))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)


def _partition(broker: BrokerServices, topic: str, wanted: OffsetForLeaderEpochRequest.OffsetForLeaderPartition,
               refused: int, replica: bool) -> EpochEndOffset:
    partition = wanted.partition
    error = refused or broker.routing.leader_error(topic, partition, wanted.current_leader_epoch)
    storage = broker.storage
    if not error and storage.log_end_offset(topic, partition) is None:
        error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if error:
        return EpochEndOffset(error_code=error, partition=partition, leader_epoch=-1, end_offset=-1)
    current = broker.routing.leader_epoch(topic, partition)
    epoch, end = epoch_end_offset(storage, topic, partition, current, wanted.leader_epoch, replica)
    return EpochEndOffset(error_code=ErrorCode.NONE, partition=partition, leader_epoch=epoch,
                          end_offset=end)


def epoch_end_offset(storage: Storage, topic: str, partition: int, current: int, asked: int,
                     replica: bool) -> tuple[int, int]:
    """(epoch, end offset) as Kafka's leader-epoch cache answers ``asked`` on the leader
    at epoch ``current`` (also Fetch v12+'s check of LastFetchedEpoch)."""
    if asked < 0 or asked > current:
        return UNDEFINED
    if asked == current:
        return current, storage.log_end_offset(topic, partition) or 0
    found = end_offset_for_epoch(storage, topic, partition, asked)
    if found == UNDEFINED and not replica:
        # Every batch left is from a later epoch (retention removed the asked one, or it
        # wrote nothing): Kafka's cache answers the asked epoch ending where the log now
        # starts, so a consumer positioned in it sees no truncation. Followers keep the
        # stricter answer: they drop a log the leader shares no epoch with.
        start = storage.log_start_offset(topic, partition)
        return asked, start if start is not None else 0
    return found
