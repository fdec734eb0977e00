"""AlterPartitionReassignments (45) and ListPartitionReassignments (46) on one node.

One node holds every replica, so the only valid target is this node itself: the move is
done at once and nothing is ever under way. Cluster mode moves replicas for real
(logserver/cluster/reassignments_admin.py); the checks and answers are shared here.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.broker import Broker

AlterResponse = AlterPartitionReassignmentsResponse
TopicResult = AlterResponse.ReassignableTopicResponse
PartitionResult = AlterResponse.ReassignablePartitionResponse
RequestPartition = AlterPartitionReassignmentsRequest.ReassignablePartition
Outcome = tuple[int, str | None]


def replicas_error(replicas: list[int], brokers: Collection[int]) -> str | None:
    """Kafka's checks of a target replica list (null, a cancel, is not checked here)."""
    if not replicas:
        return "The replica list cannot be empty."
    if len(set(replicas)) != len(replicas):
        return f"The replica list {replicas} contains duplicates."
    unknown = [b for b in replicas if b not in brokers]
    if unknown:
        return f"The replica list {replicas} names unknown broker(s) {unknown}."
    return None


def alter_response(request: AlterPartitionReassignmentsRequest,
                   decide: Callable[[str, RequestPartition], Outcome]) -> AlterResponse:
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            code, message = decide(topic.name, p)
            partitions.append(PartitionResult(partition_index=p.partition_index,
                                              error_code=code, error_message=message))
        topics.append(TopicResult(name=topic.name, partitions=partitions))
    return AlterResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                         responses=topics)


def alter_refused(request: AlterPartitionReassignmentsRequest, code: int) -> AlterResponse:
    message = "not authorized to alter the cluster"
    response = alter_response(request, lambda _t, _p: (code, message))
    response.error_code, response.error_message = code, message
    return response


def list_refused(code: int) -> ListPartitionReassignmentsResponse:
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=code,
        error_message="not authorized to describe the cluster", topics=[])


def list_response(ongoing: Iterable[tuple[str, int, list[int], list[int], list[int]]]
                  ) -> ListPartitionReassignmentsResponse:
    """``ongoing``: (topic, partition, replicas, adding, removing) of each move under way."""
    Topic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
    Partition = ListPartitionReassignmentsResponse.OngoingPartitionReassignment
    by_topic: dict[str, list[ListPartitionReassignmentsResponse.OngoingPartitionReassignment]] = {}
    for name, index, replicas, adding, removing in ongoing:
        by_topic.setdefault(name, []).append(Partition(
            partition_index=index, replicas=replicas, adding_replicas=adding,
            removing_replicas=removing))
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
        topics=[Topic(name=n, partitions=ps) for n, ps in sorted(by_topic.items())])


def handle_alter(broker: Broker, header: RequestHeader,
                 request: AlterPartitionReassignmentsRequest) -> AlterResponse:
    refused = checks.denied(broker, checks.ALTER_PARTITION_REASSIGNMENTS)
    if refused:
        return alter_refused(request, refused)
    node_id: int = broker.config["node.id"]

    def decide(name: str, p: RequestPartition) -> Outcome:
        count = broker.storage.partition_count(name)
        if count is None or not 0 <= p.partition_index < count:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
        if p.replicas is None:
            return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No reassignment is in progress."
        bad = replicas_error(list(p.replicas), [node_id])
        if bad is not None:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, bad
        return ErrorCode.NONE, None  # already where it should be

    return alter_response(request, decide)


def handle_list(broker: Broker, header: RequestHeader,
                request: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
    refused = checks.denied(broker, checks.LIST_PARTITION_REASSIGNMENTS)
    if refused:
        return list_refused(refused)
    return list_response([])
