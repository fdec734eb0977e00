"""Metadata, CreateTopics and DeleteTopics from and to the cluster state in etcd.

Metadata lists the live brokers and each partition's leader, epoch, replicas and ISR from
the ClusterModel; creating and deleting topics are etcd transactions, answered once this
broker's own watch has seen the change."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    MetadataRequest,
    MetadataResponse,
)
from logserver.cluster.assignments import AssignmentError, manual_assignment
from logserver.cluster.node import TopicCreationError
from logserver.cluster.routing import node_of
from logserver.cluster.topic_configs import topic_view
from logserver.groups import INTERNAL_TOPICS
from logserver.handlers.create_topics import MAX_PARTITIONS_PER_TOPIC, created_result
from logserver.request_context import listener_name
from logserver.security import checks
from logserver.storage.api import InvalidConfigError
from logserver.topic_config import validate_overrides
from logserver.topic_names import topic_name_error

if TYPE_CHECKING:
    from logserver.broker import Broker
    from logserver.cluster.node import ClusterNode


log = logging.getLogger(__name__)


ZERO_UUID = bytes(16)
CREATE_VISIBLE_TIMEOUT_S = 5.0
JOINING_TIMEOUT_S = 10.0  # a Metadata answer waits this long for a joining broker's state


# -- Metadata ---------------------------------------------------------------------------------

def metadata(broker: Broker, header: RequestHeader, request: MetadataRequest) -> (
        MetadataResponse | Awaitable[MetadataResponse]):
    node = node_of(broker)
    if not node.ready.is_set():
        return _once_joined(broker, header, request)
    return _metadata(broker, header, request)


async def _once_joined(broker: Broker, header: RequestHeader,
                       request: MetadataRequest) -> MetadataResponse:
    """A broker still joining (its listener is open while it registers and reads the
    cluster's state) has no brokers or topics to name yet: as Kafka serves requests only
    once its metadata has caught up, the answer waits for that (bounded)."""
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(node_of(broker).ready.wait(), JOINING_TIMEOUT_S)
    answer = _metadata(broker, header, request)
    return answer if isinstance(answer, MetadataResponse) else await answer


def _metadata(broker: Broker, header: RequestHeader, request: MetadataRequest) -> (
        MetadataResponse | Awaitable[MetadataResponse]):
    node = node_of(broker)
    version = header.api_version
    if request.topics is None or (version == 0 and not request.topics):
        # With ACLs, as on a single node: "all topics" are those the principal may describe.
        wanted: list[str | None] = [name for name in sorted(node.model.topics)
                                    if checks.allowed(broker, checks.METADATA_TOPIC, name)]
    else:
        wanted = [t.name if t.name is not None else node.model.topic_for_id(t.topic_id)
                  for t in request.topics]
    # A named topic it may not describe: TOPIC_AUTHORIZATION_FAILED, existing or not.
    errors = {name: int(ErrorCode.TOPIC_AUTHORIZATION_FAILED) for name in wanted
              if name is not None and not checks.allowed(broker, checks.METADATA_TOPIC, name)}
    allow = (request.allow_auto_topic_creation if version >= 4 else True) \
        and broker.config["auto.create.topics.enable"]
    missing = [n for n in wanted if n is not None and n not in node.model.topics
               and topic_name_error(n) is None and n not in INTERNAL_TOPICS and n not in errors]
    if allow and missing and not checks.allowed(broker, checks.AUTO_CREATE_CLUSTER):
        for name in missing:
            if not checks.allowed(broker, checks.AUTO_CREATE_TOPIC, name):
                errors[name] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        missing = [name for name in missing if name not in errors]
    if allow and missing:
        return _after_creating(broker, node, wanted, missing, errors)
    return _metadata_response(broker, node, wanted, errors)


async def _after_creating(broker: Broker, node: ClusterNode, wanted: list[str | None],
                          missing: list[str], errors: dict[str, int]) -> MetadataResponse:
    for name in dict.fromkeys(missing):
        try:
            await create_and_wait(node, name, broker.config["num.partitions"],
                                  broker.config["default.replication.factor"], {})
            errors[name] = ErrorCode.LEADER_NOT_AVAILABLE  # clients ask again shortly
        except TopicCreationError as exc:
            errors[name] = (ErrorCode.LEADER_NOT_AVAILABLE
                            if exc.error == ErrorCode.TOPIC_ALREADY_EXISTS else exc.error)
    return _metadata_response(broker, node, wanted, errors)


def _metadata_response(broker: Broker, node: ClusterNode, wanted: list[str | None],
                       errors: dict[str, int]) -> MetadataResponse:
    model = node.model
    listed = node.metadata_brokers()
    live = set(listed)
    topics = []
    for name in wanted:
        if name is not None and errors.get(name) == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            topics.append(MetadataResponse.MetadataResponseTopic(  # existence not revealed
                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=ZERO_UUID,
                partitions=[]))
            continue
        record = model.topics.get(name) if name is not None else None
        if name is None or record is None:
            error = ErrorCode.UNKNOWN_TOPIC_ID if name is None else errors.get(
                name, ErrorCode.INVALID_TOPIC_EXCEPTION if topic_name_error(name)
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            topics.append(MetadataResponse.MetadataResponseTopic(
                error_code=error, name=name, topic_id=ZERO_UUID, partitions=[]))
            continue
        # As Kafka's metadata cache: a leader that is not among the brokers listed is no
        # leader (clients look the node id up in the broker list; kafka-python's sender
        # fails on one it cannot find). Offline replicas: those without a session now.
        partitions = [
            MetadataResponse.MetadataResponsePartition(
                error_code=ErrorCode.NONE if state.leader in live else ErrorCode.LEADER_NOT_AVAILABLE,
                partition_index=index, leader_id=state.leader if state.leader in live else -1,
                leader_epoch=state.leader_epoch,
                replica_nodes=list(state.replicas), isr_nodes=list(state.isr),
                offline_replicas=state.offline_replicas(model.brokers))
            for index, state in model.topic_partitions(name)]
        topics.append(MetadataResponse.MetadataResponseTopic(
            error_code=ErrorCode.NONE, name=name, topic_id=record.topic_id,
            is_internal=name in INTERNAL_TOPICS, partitions=partitions))
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=b.node_id, host=host,
                                                         port=port, rack=b.rack)
                 for b in sorted(listed.values(), key=lambda b: b.node_id)
                 for host, port in [b.address(listener_name.get())]],
        cluster_id=model.cluster_id or broker.cluster_id,
        controller_id=model.controller_id if model.controller_id is not None else node.node_id,
        topics=topics)


# -- CreateTopics -----------------------------------------------------------------------------

async def create_and_wait(node: ClusterNode, name: str, partitions: int, replication_factor: int,
                          configs: dict[str, str],
                          assignment: list[tuple[int, ...]] | None = None) -> None:
    """Create through etcd, then wait (bounded) until our own watch has seen it, so the
    client's next Metadata to this broker finds the topic."""
    await node.create_topic(name, partitions, replication_factor, configs, assignment)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CREATE_VISIBLE_TIMEOUT_S
    while name not in node.model.topics and loop.time() < deadline:
        await asyncio.sleep(0.01)


def create_topics(broker: Broker, header: RequestHeader,
                  request: CreateTopicsRequest) -> Awaitable[CreateTopicsResponse]:
    # ACLs decided now, while the request's principal is the current one: CREATE on the
    # cluster, or on each topic (Kafka's rule); the configs in the answer need
    # DESCRIBE_CONFIGS on the topic.
    if checks.allowed(broker, checks.CREATE_TOPICS_CLUSTER):
        refused: set[str] = set()
    else:
        refused = {t.name for t in request.topics
                   if not checks.allowed(broker, checks.CREATE_TOPICS_TOPIC, t.name)}
    shown = {t.name for t in request.topics
             if checks.allowed(broker, checks.CREATE_TOPICS_CONFIGS, t.name)}
    return _create_topics(broker, request, refused, shown)


async def _create_topics(broker: Broker, request: CreateTopicsRequest,
                         refused: set[str], shown: set[str]) -> CreateTopicsResponse:
    node = node_of(broker)
    results = []
    deadline = asyncio.get_running_loop().time() + max(request.timeout_ms, 0) / 1000
    for topic in request.topics:
        if topic.name in refused:
            results.append(_result(topic.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                   "not authorized to create the topic"))
            continue
        results.append(await _create_one(broker, node, topic, request.validate_only, deadline,
                                         topic.name in shown))
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


def _result(name: str, error: int, message: str) -> Any:
    """A topic not created: no partitions, replication factor or configs (null), as Kafka."""
    return CreateTopicsResponse.CreatableTopicResult(
        name=name, topic_id=ZERO_UUID, error_code=error, error_message=message,
        num_partitions=-1, replication_factor=-1, configs=None)


async def _create_one(broker: Broker, node: ClusterNode, topic: CreateTopicsRequest.CreatableTopic,
                      validate_only: bool, deadline: float, show_configs: bool) -> Any:
    name = topic.name
    invalid = topic_name_error(name)
    if invalid is not None:
        return _result(name, ErrorCode.INVALID_TOPIC_EXCEPTION, invalid)
    if name in node.model.topics:
        return _result(name, ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
    assignment: list[tuple[int, ...]] | None = None
    if topic.assignments:  # as Kafka: counts -1, the replicas given per partition
        try:
            assignment = manual_assignment(
                ((a.partition_index, list(a.broker_ids)) for a in topic.assignments),
                topic.num_partitions, topic.replication_factor, node.model.brokers)
        except AssignmentError as exc:
            return _result(name, exc.error, str(exc))
        partitions, rf = len(assignment), len(assignment[0])
    else:
        partitions = (broker.config["num.partitions"] if topic.num_partitions == -1
                      else topic.num_partitions)
        rf = (broker.config["default.replication.factor"] if topic.replication_factor == -1
              else topic.replication_factor)
    if not 1 <= partitions <= MAX_PARTITIONS_PER_TOPIC:
        return _result(name, ErrorCode.INVALID_PARTITIONS,
                       f"number of partitions must be between 1 and {MAX_PARTITIONS_PER_TOPIC}")
    if assignment is None and not 1 <= rf <= len(node.model.brokers):
        return _result(name, ErrorCode.INVALID_REPLICATION_FACTOR,
                       f"replication factor {rf} is larger than the {len(node.model.brokers)} live brokers")
    try:
        overrides = validate_overrides({c.name: c.value for c in topic.configs})
    except InvalidConfigError as exc:
        return _result(name, ErrorCode.INVALID_CONFIG, str(exc))
    if validate_only:
        return created_result(broker, name, ZERO_UUID, partitions, rf, overrides, show_configs)
    loop = asyncio.get_running_loop()
    while True:
        try:
            await create_and_wait(node, name, partitions, rf, overrides, assignment)
            break
        except TopicCreationError as exc:
            return _result(name, exc.error, str(exc))
        except Exception as exc:  # etcd unreachable: try again within the request's timeout
            if loop.time() >= deadline:
                log.error("creating topic %s in etcd failed: %s", name, exc)
                return _result(name, ErrorCode.REQUEST_TIMED_OUT, f"cluster metadata store: {exc}")
            await asyncio.sleep(0.2)
    # The configs as DescribeConfigs will answer them (the topic record's), or as asked for
    # when our watch has not seen the topic yet.
    record = node.model.topics.get(name)
    view = topic_view(broker, name)
    config, kept = view if view is not None else (None, overrides)
    return created_result(broker, name, record.topic_id if record is not None else ZERO_UUID,
                          partitions, rf, kept, show_configs, config)


# -- DeleteTopics -----------------------------------------------------------------------------

def delete_topics(broker: Broker, header: RequestHeader,
                  request: DeleteTopicsRequest) -> Awaitable[DeleteTopicsResponse]:
    node = node_of(broker)
    if header.api_version >= 6:
        wanted = [(t.name if t.name is not None else node.model.topic_for_id(t.topic_id), t.topic_id)
                  for t in request.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    # ACLs decided now, while the request's principal is the current one.
    refused = {name for name, _ in wanted
               if name is not None and not checks.allowed(broker, checks.DELETE_TOPICS, name)}
    return _delete_topics(broker, wanted, refused)


async def _delete_topics(broker: Broker, wanted: list[tuple[str | None, bytes]],
                         refused: set[str]) -> DeleteTopicsResponse:
    node = node_of(broker)
    results = []
    for name, topic_id in wanted:
        if name is not None and name in refused:
            results.append(DeleteTopicsResponse.DeletableTopicResult(
                name=name, topic_id=topic_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                error_message="not authorized to delete the topic"))
            continue
        record = node.model.topics.get(name) if name is not None else None
        if record is None or name is None:
            error = ErrorCode.UNKNOWN_TOPIC_ID if name is None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            results.append(DeleteTopicsResponse.DeletableTopicResult(
                name=name, topic_id=topic_id, error_code=error, error_message="no such topic"))
            continue
        if not broker.config["delete.topic.enable"] or name in INTERNAL_TOPICS:
            results.append(DeleteTopicsResponse.DeletableTopicResult(
                name=name, topic_id=topic_id, error_code=ErrorCode.TOPIC_DELETION_DISABLED,
                error_message="delete.topic.enable is false"))
            continue
        try:
            deleted = await node.delete_topic(name)
        except Exception as exc:  # etcd unreachable
            log.error("deleting topic %s in etcd failed: %s", name, exc)
            results.append(DeleteTopicsResponse.DeletableTopicResult(
                name=name, topic_id=topic_id, error_code=ErrorCode.REQUEST_TIMED_OUT,
                error_message=f"cluster metadata store: {exc}"))
            continue
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CREATE_VISIBLE_TIMEOUT_S
        while name in node.model.topics and loop.time() < deadline:
            await asyncio.sleep(0.01)
        results.append(DeleteTopicsResponse.DeletableTopicResult(
            name=name, topic_id=record.topic_id,
            error_code=ErrorCode.NONE if deleted else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            error_message=None))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)
