"""CreatePartitions in cluster mode: the topic grows through one etcd transaction, and
every replica of a new partition creates it locally when its watch sees it."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import CreatePartitionsRequest, CreatePartitionsResponse
from logserver.cluster.node import TopicCreationError
from logserver.cluster.routing import node_of
from logserver.handlers.create_partitions import growth_error
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.broker import Broker
    from logserver.cluster.node import ClusterNode

log = logging.getLogger(__name__)

Result = CreatePartitionsResponse.CreatePartitionsTopicResult
VISIBLE_TIMEOUT_S = 5.0


async def create_partitions(broker: Broker, header: RequestHeader,
                            request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    node = node_of(broker)
    seen = Counter(topic.name for topic in request.topics)
    results = []
    for topic in request.topics:
        if seen[topic.name] > 1:
            results.append(_error(topic.name, ErrorCode.INVALID_REQUEST, "Duplicate topic in request."))
        else:
            results.append(await _grow(broker, node, topic, request.validate_only))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


def _error(name: str, code: int, message: str) -> Result:
    return Result(name=name, error_code=code, error_message=message)


def _assignment_error(node: ClusterNode, topic: CreatePartitionsRequest.CreatePartitionsTopic,
                      replication_factor: int) -> str | None:
    for a in topic.assignments or []:
        if len(a.broker_ids) != replication_factor:
            return (f"Inconsistent replication factor between partitions: {replication_factor} "
                    f"and {len(a.broker_ids)}.")
        if len(set(a.broker_ids)) != len(a.broker_ids):
            return f"Duplicate brokers not allowed in replica assignment: {a.broker_ids}."
        unknown = [b for b in a.broker_ids if b not in node.model.brokers]
        if unknown:
            return f"Unknown broker(s) in replica assignment: {unknown}."
    return None


async def _grow(broker: Broker, node: ClusterNode,
                topic: CreatePartitionsRequest.CreatePartitionsTopic, validate_only: bool) -> Result:
    name, count = topic.name, topic.count
    refused = checks.denied(broker, checks.CREATE_PARTITIONS, name)
    if refused:
        return _error(name, refused, f"not authorized to alter topic {name!r}")
    record = node.model.topics.get(name)
    if record is None:
        return _error(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
    wrong = growth_error(topic, record.partitions)
    if wrong is not None:
        return wrong
    first = node.model.partition(name, 0)
    rf = len(first.replicas) if first is not None else 1
    bad = _assignment_error(node, topic, rf)
    if bad is not None:
        return _error(name, ErrorCode.INVALID_REPLICA_ASSIGNMENT, bad)
    if validate_only:
        return Result(name=name, error_code=ErrorCode.NONE, error_message=None)
    assignment = ([tuple(a.broker_ids) for a in topic.assignments]
                  if topic.assignments is not None else None)
    try:
        await node.add_partitions(name, count, assignment)
    except TopicCreationError as exc:
        return _error(name, exc.error, str(exc))
    except Exception as exc:  # etcd unreachable
        log.error("growing topic %s in etcd failed: %s", name, exc)
        return _error(name, ErrorCode.REQUEST_TIMED_OUT, f"cluster metadata store: {exc}")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + VISIBLE_TIMEOUT_S  # answered once our own watch has it
    while loop.time() < deadline and (
            (r := node.model.topics.get(name)) is None or r.partitions < count
            or any(node.model.partition(name, i) is None for i in range(count))):
        await asyncio.sleep(0.01)
    return Result(name=name, error_code=ErrorCode.NONE, error_message=None)
