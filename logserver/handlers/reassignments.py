"""AlterPartitionReassignments (45) and ListPartitionReassignments (46), in both modes.

ACLs and the answers are here; ``broker.control`` starts (or cancels) each move. On one
node, which holds every replica, the only valid target is this node itself: the move is
done at once and nothing is ever under way. A cluster moves replicas for real
(logserver/cluster/control.py, reassignment.py); the request is answered once the move
started, as Kafka does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
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
    from logserver.services import BrokerServices

AlterResponse = AlterPartitionReassignmentsResponse
TopicResult = AlterResponse.ReassignableTopicResponse
PartitionResult = AlterResponse.ReassignablePartitionResponse
RequestPartition = AlterPartitionReassignmentsRequest.ReassignablePartition
Outcome = tuple[int, str | None]


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


async def handle_alter(broker: BrokerServices, header: RequestHeader,
                       request: AlterPartitionReassignmentsRequest) -> AlterResponse:
    refused = checks.denied(broker, checks.ALTER_PARTITION_REASSIGNMENTS)
    if refused:
        return alter_refused(request, refused)
    outcomes: dict[tuple[str, int], Outcome] = {}
    for topic in request.topics:
        for p in topic.partitions:
            outcomes[(topic.name, p.partition_index)] = await broker.control.reassign(
                topic.name, p.partition_index, None if p.replicas is None else list(p.replicas))
    return alter_response(request, lambda name, p: outcomes[(name, p.partition_index)])


def handle_list(broker: BrokerServices, header: RequestHeader,
                request: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
    refused = checks.denied(broker, checks.LIST_PARTITION_REASSIGNMENTS)
    if refused:
        return list_refused(refused)
    wanted = None if request.topics is None else [
        (t.name, i) for t in request.topics for i in t.partition_indexes]
    return list_response(broker.control.ongoing_reassignments(wanted))
