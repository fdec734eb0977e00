"""CreatePartitions: grow a topic; existing partitions and their data stay as they are.

One node, so every new partition's replica list is this node. The new partitions are
created on the storage worker and appear in Metadata when they exist completely.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import CreatePartitionsRequest, CreatePartitionsResponse
from logserver.groups import INTERNAL_TOPICS
from logserver.handlers.create_topics import MAX_PARTITIONS_PER_TOPIC
from logserver.security import checks
from logserver.storage.api import InvalidTopicError, UnknownTopicOrPartitionError

if TYPE_CHECKING:
    from logserver.broker import Broker

log = logging.getLogger(__name__)

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


async def handle(broker: Broker, header: RequestHeader,
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


async def _grow(broker: Broker, topic: CreatePartitionsRequest.CreatePartitionsTopic,
                validate_only: bool) -> Result:
    name, count = topic.name, topic.count
    storage = broker.storage
    refused = checks.denied(broker, checks.CREATE_PARTITIONS, name)
    if refused:
        return _error(name, refused, f"not authorized to alter topic {name!r}")
    current = storage.partition_count(name)
    if current is None:
        return _error(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
    wrong = growth_error(topic, current)
    if wrong is not None:
        return wrong
    if topic.assignments is not None and any(a.broker_ids != [broker.node_id]
                                             for a in topic.assignments):
        return _error(name, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                      f"this cluster has one broker, node {broker.node_id}")
    held = sum(storage.partition_count(n) or 0 for n in storage.topic_names())
    if held + count - current > broker.config["max.partitions"]:
        return _error(name, ErrorCode.POLICY_VIOLATION,
                      f"the broker holds {held} partitions; {count - current} more would exceed "
                      f"max.partitions {broker.config['max.partitions']}")
    if validate_only:
        return Result(name=name, error_code=ErrorCode.NONE, error_message=None)
    try:
        await storage.add_partitions(name, count)
    except UnknownTopicOrPartitionError as exc:  # deleted meanwhile
        return _error(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, str(exc))
    except InvalidTopicError as exc:  # a concurrent request grew it first
        return _error(name, ErrorCode.INVALID_PARTITIONS, str(exc))
    except OSError as exc:
        log.error("adding partitions to %s failed: %s", name, exc)
        return _error(name, ErrorCode.KAFKA_STORAGE_ERROR, f"adding partitions failed: {exc}")
    log.info("topic %s grown from %d to %d partitions", name, current, count)
    return Result(name=name, error_code=ErrorCode.NONE, error_message=None)
