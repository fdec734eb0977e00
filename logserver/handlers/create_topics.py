"""CreateTopics: one node, so replication factor 1 and assignments only to this node.

The creation itself runs on the storage worker; the answer comes when the topic exists
completely (or the creation failed and left nothing behind).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import CreateTopicsRequest, CreateTopicsResponse
from logserver.broker import PolicyViolationError
from logserver.broker_overrides import Overlay
from logserver.security import checks
from logserver.storage.api import InvalidConfigError, InvalidTopicError, TopicExistsError
from logserver.topic_config import (
    TopicConfig,
    alterable,
    describe,
    min_insync_replicas,
    validate_overrides,
)
from logserver.topic_names import topic_name_error

if TYPE_CHECKING:
    from logserver.broker import Broker

log = logging.getLogger(__name__)

Result = CreateTopicsResponse.CreatableTopicResult
MAX_PARTITIONS_PER_TOPIC = 100_000


async def handle(broker: Broker, header: RequestHeader, request: CreateTopicsRequest) -> CreateTopicsResponse:
    seen = Counter(topic.name for topic in request.topics)
    # As Kafka: CREATE on the cluster, else on each topic; the configs in the answer
    # need DESCRIBE_CONFIGS on the topic.
    on_cluster = checks.allowed(broker, checks.CREATE_TOPICS_CLUSTER)
    results = await asyncio.gather(*(
        _refused(topic.name, ErrorCode.INVALID_REQUEST, "topic named more than once")
        if seen[topic.name] != 1
        else _create(broker, topic, request.validate_only,
                     checks.allowed(broker, checks.CREATE_TOPICS_CONFIGS, topic.name))
        if on_cluster or checks.allowed(broker, checks.CREATE_TOPICS_TOPIC, topic.name)
        else _refused(topic.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                      "not authorized to create this topic")
        for topic in request.topics))
    return CreateTopicsResponse(throttle_time_ms=0, topics=list(results))


def _error(name: str, code: int, message: str) -> Result:
    return Result(name=name, error_code=code, error_message=message, num_partitions=-1,
                  replication_factor=-1, configs=None)


async def _refused(name: str, code: int, message: str) -> Result:
    return _error(name, code, message)


async def _create(broker: Broker, topic: CreateTopicsRequest.CreatableTopic, validate_only: bool,
                  show_configs: bool) -> Result:
    name = topic.name
    invalid = topic_name_error(name)
    if invalid is not None:
        return _error(name, ErrorCode.INVALID_TOPIC_EXCEPTION, invalid)
    if broker.storage.partition_count(name) is not None:
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
    try:
        overrides = validate_overrides({config.name: config.value for config in topic.configs})
    except InvalidConfigError as exc:
        return _error(name, ErrorCode.INVALID_CONFIG, str(exc))
    limit = broker.topic_limit_error(partitions)  # max.topics / max.partitions
    if limit is not None:
        return _error(name, ErrorCode.POLICY_VIOLATION, limit)
    topic_id = bytes(16)
    if not validate_only:
        try:
            topic_id = await broker.create_topic(name, partitions, overrides)
        except TopicExistsError as exc:  # lost a race with a concurrent creation
            return _error(name, ErrorCode.TOPIC_ALREADY_EXISTS, str(exc))
        except PolicyViolationError as exc:
            return _error(name, ErrorCode.POLICY_VIOLATION, str(exc))
        except InvalidTopicError as exc:
            return _error(name, ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc))
        except InvalidConfigError as exc:
            return _error(name, ErrorCode.INVALID_CONFIG, str(exc))
        except OSError as exc:
            log.error("creating topic %s failed: %s", name, exc)
            return _error(name, ErrorCode.KAFKA_STORAGE_ERROR, f"creating the topic failed: {exc}")
    return created_result(broker, name, topic_id, partitions, 1, overrides, show_configs,
                          broker.storage.topic_config(name) if not validate_only else None)


def created_result(broker: Broker, name: str, topic_id: bytes, partitions: int,
                   replication_factor: int, overrides: Mapping[str, str], show_configs: bool,
                   config: TopicConfig | None = None) -> Result:
    """The answer for a topic created (or that validate_only would create), in single-node
    and cluster mode alike: its partitions, replication factor and every config with its
    value and source (v5+). Java's AdminClient reads the configs of a success without a null
    check; without DESCRIBE_CONFIGS they are empty with TOPIC_AUTHORIZATION_FAILED, as Kafka.
    ``config`` is the topic's resolved config when known, else it is resolved from the
    broker's settings and ``overrides``."""
    min_isr = min_insync_replicas(overrides, broker.config["min.insync.replicas"])
    if replication_factor < min_isr:
        log.warning("topic %s: replication factor %d is below min.insync.replicas %d, so "
                    "every acks=all produce to it will get NOT_ENOUGH_REPLICAS", name,
                    replication_factor, min_isr)
    if not show_configs:
        return Result(name=name, topic_id=topic_id, error_code=ErrorCode.NONE, error_message=None,
                      num_partitions=partitions, replication_factor=replication_factor, configs=[],
                      topic_config_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if config is None:
        config = TopicConfig.from_settings(
            Overlay(broker.config, broker.storage.broker_overrides().effective()), overrides)
    return Result(
        name=name, topic_id=topic_id, error_code=ErrorCode.NONE, error_message=None,
        num_partitions=partitions, replication_factor=replication_factor,
        configs=[
            CreateTopicsResponse.CreatableTopicConfigs(
                name=key, value=value, read_only=not alterable(key), config_source=source,
                is_sensitive=False)
            for key, value, source, _ in describe(config, overrides, broker.config, broker.config.sources,
                                                  broker.storage.broker_overrides().by_setting())
        ],
    )
