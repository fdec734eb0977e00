"""CreatePartitions: grow a topic; existing partitions and their data stay as they are.

The same checks in both modes (ACLs, Kafka's count checks, the replica assignments
against the topic's replication factor and the registered brokers, max.partitions);
``broker.control`` grows the topic (on the storage worker on a single node, by an etcd
transaction in a cluster, spread as at creation) and the answer comes once this
broker's catalog has the new partitions.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Collection
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import CreatePartitionsRequest, CreatePartitionsResponse
from logserver.control.api import ControlError
from logserver.handlers.create_topics import MAX_PARTITIONS_PER_TOPIC
from logserver.internal_topics import INTERNAL_TOPICS
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.services import BrokerServices

log = logging.getLogger(__name__)

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


async def handle(broker: BrokerServices, header: RequestHeader,
                 request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    seen = Counter(topic.name for topic in request.topics)
    results = []
    for topic in request.topics:  # one at a time: each checks max.partitions after the last
        if seen[topic.name] > 1:
            results.append(Result(name=topic.name, error_code=ErrorCode.INVALID_REQUEST,
                                  error_message="Duplicate topic in request."))
        else:
            results.append(await _grow(broker, topic, request.validate_only))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


def _error(name: str, code: int, message: str) -> Result:
    return Result(name=name, error_code=code, error_message=message)


def growth_error(topic: CreatePartitionsRequest.CreatePartitionsTopic, current: int) -> Result | None:
    """Kafka's checks of the requested count (and assignment count) against the current one,
    the same on one broker and in a cluster."""
    name, count = topic.name, topic.count
    if name in INTERNAL_TOPICS:  # the group coordinator maps groups to its partitions
        return _error(name, ErrorCode.INVALID_REQUEST,
                      f"the partitions of internal topic {name} cannot be changed")
    if count == current:
        return _error(name, ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
    if count < current:
        return _error(name, ErrorCode.INVALID_PARTITIONS,
                      f"Topic currently has {current} partitions, which is higher than the "
                      f"requested {count}.")
    if count > MAX_PARTITIONS_PER_TOPIC:
        return _error(name, ErrorCode.INVALID_PARTITIONS,
                      f"number of partitions must be at most {MAX_PARTITIONS_PER_TOPIC}")
    if topic.assignments is not None and len(topic.assignments) != count - current:
        return _error(name, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                      f"Increasing the number of partitions by {count - current} but "
                      f"{len(topic.assignments)} assignments provided.")
    return None


def _assignment_error(topic: CreatePartitionsRequest.CreatePartitionsTopic,
                      replication_factor: int, brokers: Collection[int]) -> str | None:
    for a in topic.assignments or []:
        if len(a.broker_ids) != replication_factor:
            return (f"Inconsistent replication factor between partitions: {replication_factor} "
                    f"and {len(a.broker_ids)}.")
        if len(set(a.broker_ids)) != len(a.broker_ids):
            return f"Duplicate brokers not allowed in replica assignment: {a.broker_ids}."
        unknown = [b for b in a.broker_ids if b not in brokers]
        if unknown:
            return f"Unknown broker(s) in replica assignment: {unknown}."
    return None


async def _grow(broker: BrokerServices, topic: CreatePartitionsRequest.CreatePartitionsTopic,
                validate_only: bool) -> Result:
    name, count = topic.name, topic.count
    control = broker.control
    refused = checks.denied(broker, checks.CREATE_PARTITIONS, name)
    if refused:
        return _error(name, refused, f"not authorized to alter topic {name!r}")
    current = control.partition_count(name)
    if current is None:
        return _error(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
    wrong = growth_error(topic, current)
    if wrong is not None:
        return wrong
    bad = _assignment_error(topic, control.replication_factor(name), control.broker_ids())
    if bad is not None:
        return _error(name, ErrorCode.INVALID_REPLICA_ASSIGNMENT, bad)
    limit = control.partition_limit_error(count - current)
    if limit is not None:
        return _error(name, ErrorCode.POLICY_VIOLATION, limit)
    if validate_only:
        return Result(name=name, error_code=ErrorCode.NONE, error_message=None)
    assignment = ([tuple(a.broker_ids) for a in topic.assignments]
                  if topic.assignments is not None else None)
    try:
        await control.add_partitions(name, count, assignment)
    except ControlError as exc:
        return _error(name, exc.error, str(exc))
    log.info("topic %s grown from %d to %d partitions", name, current, count)
    return Result(name=name, error_code=ErrorCode.NONE, error_message=None)
