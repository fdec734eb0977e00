"""Metadata: this node as the one broker, controller and leader of every partition.

Auto-creating topics (``auto.create.topics.enable``, the request allowing it) makes the
answer wait for the creation, which runs on the storage worker; a topic that another
request is creating right now is LEADER_NOT_AVAILABLE (clients retry), as in Kafka.

With ACLs, as Kafka: "all topics" lists only the topics the principal may DESCRIBE; a
named topic it may not describe is TOPIC_AUTHORIZATION_FAILED whether it exists or not;
auto-creation needs CREATE on the cluster or on the topic. v8+ answer the authorized
operations bitfields when asked (INT32_MIN when not).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import MetadataRequest, MetadataResponse
from kafkaproto.messages.metadata import AUTHORIZED_OPERATIONS_OMITTED
from logserver.groups import INTERNAL_TOPICS, OFFSETS_TOPIC
from logserver.partition import LEADER_EPOCH
from logserver.security import checks
from logserver.security.acl import CLUSTER_NAME, ResourceType
from logserver.storage.api import TopicExistsError
from logserver.topic_names import topic_name_error

if TYPE_CHECKING:
    from logserver.broker import Broker

log = logging.getLogger(__name__)

ZERO_UUID = bytes(16)
Topic = MetadataResponse.MetadataResponseTopic
Partition = MetadataResponse.MetadataResponsePartition
Wanted = list[tuple[str | None, bytes | None]]


def handle(broker: Broker, header: RequestHeader, request: MetadataRequest) -> (
        MetadataResponse | Awaitable[MetadataResponse]):
    version = header.api_version
    storage = broker.storage
    if request.topics is None or (version == 0 and not request.topics):
        wanted: Wanted = [(name, None) for name in storage.topic_names()
                          if checks.allowed(broker, checks.METADATA_TOPIC, name)]
    else:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    allow_create = (request.allow_auto_topic_creation if version >= 4 else True) \
        and broker.config["auto.create.topics.enable"]
    missing = [name for name, _ in wanted if name is not None
               and storage.partition_count(name) is None and topic_name_error(name) is None
               and checks.allowed(broker, checks.METADATA_TOPIC, name)]
    created: dict[str, int] = {}
    if allow_create and missing and not checks.allowed(broker, checks.AUTO_CREATE_CLUSTER):
        for name in missing:
            if not checks.allowed(broker, checks.AUTO_CREATE_TOPIC, name):
                created[name] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        missing = [name for name in missing if name not in created]
    operations = _AuthorizedOperations(broker, request, version)
    if allow_create and missing:
        return _after_creating(broker, wanted, missing, created, operations)
    return _response(broker, wanted, created, operations)


class _AuthorizedOperations:
    """The bitfields the request asked for, computed now (while the request's principal is
    the current one), applied to the response when it is built."""

    def __init__(self, broker: Broker, request: MetadataRequest, version: int) -> None:
        self.cluster = AUTHORIZED_OPERATIONS_OMITTED
        if 8 <= version <= 10 and request.include_cluster_authorized_operations:
            self.cluster = checks.authorized_operations(broker, ResourceType.CLUSTER, CLUSTER_NAME) \
                if checks.allowed(broker, checks.METADATA_CLUSTER) else 0
        self.topics = version >= 8 and request.include_topic_authorized_operations
        self.version = version  # the request's: what the response may hold depends on it
        self.describable: dict[str, bool] = {}
        self._bits: dict[str, int] = {}
        self._broker = broker

    def may_describe(self, name: str) -> bool:
        allowed = self.describable.get(name)
        if allowed is None:
            allowed = self.describable[name] = checks.allowed(self._broker, checks.METADATA_TOPIC, name)
            if allowed and self.topics:
                self._bits[name] = checks.authorized_operations(self._broker, ResourceType.TOPIC, name)
        return allowed

    def topic(self, name: str) -> int:
        return self._bits.get(name, AUTHORIZED_OPERATIONS_OMITTED)


async def _after_creating(broker: Broker, wanted: Wanted, missing: list[str],
                          created: dict[str, int], operations: _AuthorizedOperations) -> MetadataResponse:
    names = list(dict.fromkeys(missing))
    for name, _ in wanted:  # decided now: a coroutine's principal is not guaranteed later
        if name is not None:
            operations.may_describe(name)
    outcomes = await asyncio.gather(*(_auto_create(broker, name) for name in names))
    return _response(broker, wanted, {**created, **dict(zip(names, outcomes, strict=True))},
                     operations)


async def _auto_create(broker: Broker, name: str) -> int:
    """The error code for a topic that had to be created (NONE when it now exists)."""
    if name == OFFSETS_TOPIC:  # created with its own settings, as Kafka does
        error = await broker.groups.ensure_offsets_topic()
        return ErrorCode.LEADER_NOT_AVAILABLE if error is not None else ErrorCode.NONE
    partitions = broker.config["num.partitions"]
    if broker.topic_limit_error(partitions) is not None:
        return ErrorCode.POLICY_VIOLATION
    try:
        await broker.create_topic(name, partitions, {})
    except TopicExistsError:  # another request is creating it right now
        return ErrorCode.NONE if broker.storage.partition_count(name) is not None \
            else ErrorCode.LEADER_NOT_AVAILABLE
    except Exception as exc:  # disk full, the limits, ...: the client may retry
        log.error("auto-creating topic %s failed: %s", name, exc)
        return ErrorCode.LEADER_NOT_AVAILABLE
    return ErrorCode.NONE


def _response(broker: Broker, wanted: Wanted, created: dict[str, int],
              operations: _AuthorizedOperations) -> MetadataResponse:
    host, port = broker.advertised_address
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=broker.node_id, host=host, port=port, rack=None)],
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        topics=[_describe(broker, name, topic_id, created, operations) for name, topic_id in wanted],
        cluster_authorized_operations=operations.cluster,
    )


def _describe(broker: Broker, name: str | None, topic_id: bytes | None,
              created: dict[str, int], operations: _AuthorizedOperations) -> Topic:
    storage = broker.storage
    by_id = name is None
    if name is None:
        name = storage.topic_for_id(topic_id) if topic_id and topic_id != ZERO_UUID else None
        if name is None:
            if operations.version < 12:  # names are not nullable in v10-11 responses: Kafka refuses these
                return Topic(error_code=ErrorCode.INVALID_REQUEST, name="",
                             topic_id=topic_id or ZERO_UUID, partitions=[])
            return Topic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=topic_id or ZERO_UUID,
                         partitions=[])
    if not operations.may_describe(name):  # existence not revealed; ids are not secret
        return Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=None if by_id else name,
                     topic_id=topic_id if by_id and topic_id else ZERO_UUID, partitions=[])
    topic = _describe_allowed(broker, name, created)
    topic.topic_authorized_operations = operations.topic(name)
    return topic


def _describe_allowed(broker: Broker, name: str, created: dict[str, int]) -> Topic:
    storage = broker.storage
    count = storage.partition_count(name)
    if count is None:
        if topic_name_error(name) is not None:
            return Topic(error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, name=name, partitions=[])
        error = created.get(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return Topic(error_code=error if error != ErrorCode.NONE else ErrorCode.LEADER_NOT_AVAILABLE,
                     name=name, partitions=[])
    node = broker.node_id
    return Topic(
        error_code=ErrorCode.NONE, name=name, topic_id=storage.topic_id(name) or ZERO_UUID,
        is_internal=name in INTERNAL_TOPICS,
        partitions=[
            Partition(error_code=ErrorCode.NONE, partition_index=index, leader_id=node,
                      leader_epoch=LEADER_EPOCH, replica_nodes=[node], isr_nodes=[node],
                      offline_replicas=[])
            for index in range(count)
        ],
    )
