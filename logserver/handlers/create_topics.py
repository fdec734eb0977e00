"""CreateTopics: one node, so replication factor 1 and assignments only to this node."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import CreateTopicsRequest, CreateTopicsResponse
from logserver.topic_config import effective_topic_configs, validate_topic_configs
from logserver.topic_names import topic_name_error

if TYPE_CHECKING:
    from logserver.broker import Broker

Result = CreateTopicsResponse.CreatableTopicResult
MAX_PARTITIONS_PER_TOPIC = 100_000


def handle(broker: Broker, header: RequestHeader, request: CreateTopicsRequest) -> CreateTopicsResponse:
    seen = Counter(topic.name for topic in request.topics)
    results = []
    for topic in request.topics:
        if seen[topic.name] > 1:
            results.append(_error(topic.name, ErrorCode.INVALID_REQUEST, "topic named more than once"))
            continue
        results.append(_create(broker, topic, request.validate_only))
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


def _error(name: str, code: int, message: str) -> Result:
    return Result(name=name, error_code=code, error_message=message, num_partitions=-1,
                  replication_factor=-1, configs=None)


def _create(broker: Broker, topic: CreateTopicsRequest.CreatableTopic, validate_only: bool) -> Result:
    name = topic.name
    invalid = topic_name_error(name)
    if invalid is not None:
        return _error(name, ErrorCode.INVALID_TOPIC_EXCEPTION, invalid)
    if broker.partition_count(name) is not None:
        return _error(name, ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            return _error(name, ErrorCode.INVALID_REQUEST,
                          "give either assignments or partitions and replication factor")
        if any(broker_ids != [broker.node_id] for broker_ids in (a.broker_ids for a in topic.assignments)):
            return _error(name, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                          f"this cluster has one broker, node {broker.node_id}")
        partitions = len(topic.assignments)
    else:
        partitions = broker.config["num.partitions"] if topic.num_partitions == -1 else topic.num_partitions
        if topic.replication_factor not in (-1, 1):
            return _error(name, ErrorCode.INVALID_REPLICATION_FACTOR,
                          f"replication factor {topic.replication_factor} is larger than the 1 broker")
    if not 1 <= partitions <= MAX_PARTITIONS_PER_TOPIC:
        return _error(name, ErrorCode.INVALID_PARTITIONS,
                      f"number of partitions must be between 1 and {MAX_PARTITIONS_PER_TOPIC}")
    configs = {config.name: config.value for config in topic.configs}
    problem = validate_topic_configs(configs)
    if problem is not None:
        return _error(name, ErrorCode.INVALID_CONFIG, problem)
    limit = broker.topic_limit_error(partitions)  # max.topics / max.partitions
    if limit is not None:
        return _error(name, ErrorCode.POLICY_VIOLATION, limit)
    if not validate_only:
        broker.create_topic(name, partitions, configs)  # type: ignore[arg-type]
    topic_id = broker.topic_id(name) if not validate_only else bytes(16)
    return Result(
        name=name, topic_id=topic_id, error_code=ErrorCode.NONE, error_message=None,
        num_partitions=partitions, replication_factor=1,
        configs=[
            CreateTopicsResponse.CreatableTopicConfigs(
                name=key, value=value, read_only=False, config_source=source, is_sensitive=False)
            for key, value, source in effective_topic_configs(configs, broker.config)  # type: ignore[arg-type]
        ],
    )
