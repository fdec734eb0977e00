"""AlterPartitionReassignments and ListPartitionReassignments in cluster mode.

A move starts with a compare-and-swap of the partition state in etcd (the replica set
grows by the target replicas, see reassignment.py); the request is answered once it
started, as Kafka does. The new replicas catch up as followers, the leader takes them into
the ISR, and the controller finishes the move (ClusterNode's controller pass).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from logserver.cluster import reassignment
from logserver.cluster.model import PartitionState
from logserver.cluster.routing import node_of
from logserver.groups import INTERNAL_TOPICS
from logserver.handlers.reassignments import (
    Outcome,
    RequestPartition,
    alter_refused,
    alter_response,
    list_refused,
    list_response,
    replicas_error,
)
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.broker import Broker
    from logserver.cluster.node import ClusterNode

log = logging.getLogger(__name__)

CAS_ATTEMPTS = 5


async def alter(broker: Broker, header: RequestHeader,
                request: AlterPartitionReassignmentsRequest) -> AlterPartitionReassignmentsResponse:
    refused = checks.denied(broker, checks.ALTER_PARTITION_REASSIGNMENTS)
    if refused:
        return alter_refused(request, refused)
    node = node_of(broker)
    outcomes: dict[tuple[str, int], Outcome] = {}
    for topic in request.topics:
        for p in topic.partitions:
            outcomes[(topic.name, p.partition_index)] = await _move(node, topic.name, p)
    return alter_response(request, lambda name, p: outcomes[(name, p.partition_index)])


async def _move(node: ClusterNode, topic: str, p: RequestPartition) -> Outcome:
    key = node.keys.partition(topic, p.partition_index)
    target = None if p.replicas is None else tuple(p.replicas)
    if topic in INTERNAL_TOPICS:  # its group coordinator follows leadership, not moves (yet)
        return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"{topic} cannot be reassigned in this version")
    if target is not None:
        bad = replicas_error(list(target), node.model.brokers)
        if bad is not None:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, bad
    try:
        for _ in range(CAS_ATTEMPTS):  # lost a race with an ISR or leader change: read again
            found = await node.store.get(key)
            if found is None or topic not in node.model.topics:
                return (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        "This server does not host this topic-partition.")
            state = PartitionState.decode(found[0])
            if target is None:
                if not reassignment.reassigning(state):
                    return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No reassignment is in progress."
                try:
                    new = reassignment.cancel(state)
                except ValueError as exc:
                    return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"cannot cancel: {exc}"
            else:
                new = reassignment.begin(state, target)
            if new == state:
                return ErrorCode.NONE, None
            if await node.store.swap(key, new.encode(), found[1]):
                log.info("%s-%d: %s, replicas %s -> %s (adding %s, removing %s)", topic,
                         p.partition_index, "reassignment cancelled" if target is None
                         else "reassigning", list(state.replicas), list(new.replicas),
                         list(new.adding), list(new.removing))
                return ErrorCode.NONE, None
    except Exception as exc:  # etcd unreachable
        log.error("reassigning %s-%d in etcd failed: %s", topic, p.partition_index, exc)
        return ErrorCode.REQUEST_TIMED_OUT, f"cluster metadata store: {exc}"
    return ErrorCode.REQUEST_TIMED_OUT, "the partition kept changing; try again"


def list_(broker: Broker, header: RequestHeader,
          request: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
    refused = checks.denied(broker, checks.LIST_PARTITION_REASSIGNMENTS)
    if refused:
        return list_refused(refused)
    model = node_of(broker).model
    if request.topics is None:
        wanted = sorted(model.partitions)
    else:
        wanted = [(t.name, i) for t in request.topics for i in t.partition_indexes]
    ongoing = []
    for where in wanted:
        state = model.partition(*where)
        if state is not None and reassignment.reassigning(state):
            ongoing.append((*where, list(state.replicas), list(state.adding), list(state.removing)))
    return list_response(ongoing)
