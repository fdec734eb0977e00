"""CreateTopics, in both modes: ACLs, names, counts, replica assignments (as Kafka's
controller checks them, against the brokers the control plane has registered), configs
and max.topics / max.partitions are checked here; ``broker.control`` creates the topic
(on the storage worker on a single node, by an etcd transaction in a cluster) and the
answer comes when this broker's catalog has it (or the creation failed and left nothing
behind). Without a replication factor a topic gets the control plane's default: 1 on a
single node, ``default.replication.factor`` in a cluster.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import CreateTopicsRequest, CreateTopicsResponse
from logserver.broker_overrides import Overlay
from logserver.control.api import ControlError
from logserver.control.assignments import AssignmentError, manual_assignment
from logserver.security import checks
from logserver.storage.api import InvalidConfigError
from logserver.topic_config import (
    TopicConfig,
    alterable,
    describe,
    min_insync_replicas,
    validate_overrides,
)
from logserver.topic_names import topic_name_error

if TYPE_CHECKING:
    from logserver.services import BrokerServices

log = logging.getLogger(__name__)

Result = CreateTopicsResponse.CreatableTopicResult
MAX_PARTITIONS_PER_TOPIC = 100_000
ZERO_UUID = bytes(16)


async def handle(broker: BrokerServices, header: RequestHeader, request: CreateTopicsRequest) -> CreateTopicsResponse:
    seen = Counter(topic.name for topic in request.topics)
    # As Kafka: CREATE on the cluster, else on each topic; the configs in the answer
    # need DESCRIBE_CONFIGS on the topic.
    on_cluster = checks.allowed(broker, checks.CREATE_TOPICS_CLUSTER)
    results = await asyncio.gather(*(
        _refused(topic.name, ErrorCode.INVALID_REQUEST, "topic named more than once")
        if seen[topic.name] != 1
        else _create(broker, topic, request.validate_only, request.timeout_ms,
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


async def _create(broker: BrokerServices, topic: CreateTopicsRequest.CreatableTopic, validate_only: bool,
                  timeout_ms: int, show_configs: bool) -> Result:
    name = topic.name
    control = broker.control
    invalid = topic_name_error(name)
    if invalid is not None:
        return _error(name, ErrorCode.INVALID_TOPIC_EXCEPTION, invalid)
    if control.partition_count(name) is not None:
        return _error(name, ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
    assignment: list[tuple[int, ...]] | None = None
    if topic.assignments:  # as Kafka: counts -1, the replicas given per partition
        try:
            assignment = manual_assignment(
                ((a.partition_index, list(a.broker_ids)) for a in topic.assignments),
                topic.num_partitions, topic.replication_factor, control.broker_ids())
        except AssignmentError as exc:
            return _error(name, exc.error, str(exc))
        partitions, replication_factor = len(assignment), len(assignment[0])
    else:
        partitions = broker.config["num.partitions"] if topic.num_partitions == -1 else topic.num_partitions
        replication_factor = (control.default_replication_factor()
                              if topic.replication_factor == -1 else topic.replication_factor)
    if not 1 <= partitions <= MAX_PARTITIONS_PER_TOPIC:
        return _error(name, ErrorCode.INVALID_PARTITIONS,
                      f"number of partitions must be between 1 and {MAX_PARTITIONS_PER_TOPIC}")
    brokers = len(control.broker_ids())
    if assignment is None and not 1 <= replication_factor <= brokers:
        return _error(name, ErrorCode.INVALID_REPLICATION_FACTOR,
                      f"replication factor {replication_factor} is larger than the {brokers} "
                      f"live broker{'s' if brokers != 1 else ''}"
                      if replication_factor > 0 else
                      f"replication factor {replication_factor} must be at least 1")
    try:
        overrides = validate_overrides({config.name: config.value for config in topic.configs})
    except InvalidConfigError as exc:
        return _error(name, ErrorCode.INVALID_CONFIG, str(exc))
    limit = control.topic_limit_error(partitions)  # max.topics / max.partitions
    if limit is not None:
        return _error(name, ErrorCode.POLICY_VIOLATION, limit)
    if validate_only:
        return created_result(broker, name, ZERO_UUID, partitions, replication_factor,
                              overrides, show_configs)
    try:
        topic_id = await control.create_topic(name, partitions, replication_factor, overrides,
                                              assignment, timeout_ms)
    except ControlError as exc:
        return _error(name, exc.error, str(exc))
    # The configs as DescribeConfigs will answer them, or as asked for when this broker's
    # catalog does not have the topic yet.
    view = control.topic_view(name)
    config, kept = view if view is not None else (None, overrides)
    return created_result(broker, name, topic_id, partitions, replication_factor, kept,
                          show_configs, config)


def created_result(broker: BrokerServices, name: str, topic_id: bytes, partitions: int,
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
