"""Metadata: the brokers, the controller and each topic's partitions as the control plane
(``broker.control``: this node alone, or the cluster in etcd) knows them, in both modes.

Auto-creating topics (``auto.create.topics.enable``, the request allowing it) makes the
answer wait for the creation; a topic that another request is creating right now is
LEADER_NOT_AVAILABLE (clients retry), as in Kafka. A partition whose leader is not among
the brokers listed has no leader (LEADER_NOT_AVAILABLE, leader -1), as Kafka's metadata
cache: clients look the node id up in the broker list. A broker still joining a cluster
answers once it knows the cluster's state (bounded).

With ACLs, as Kafka: "all topics" lists only the topics the principal may DESCRIBE; a
named topic it may not describe is TOPIC_AUTHORIZATION_FAILED whether it exists or not;
auto-creation needs CREATE on the cluster or on the topic. v8+ answer the authorized
operations bitfields when asked (INT32_MIN when not).

v12+ asks by topic id when any topic of the request carries one (the names are then
ignored, as Kafka does): each known id answered with its topic, an unknown one
UNKNOWN_TOPIC_ID without a name.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import MetadataRequest, MetadataResponse
from kafkaproto.messages.metadata import AUTHORIZED_OPERATIONS_OMITTED
from logserver.internal_topics import INTERNAL_TOPICS
from logserver.security import checks
from logserver.security.acl import CLUSTER_NAME, ResourceType
from logserver.topic_names import topic_name_error

if TYPE_CHECKING:
    from logserver.services import BrokerServices

log = logging.getLogger(__name__)

ZERO_UUID = bytes(16)
Topic = MetadataResponse.MetadataResponseTopic
Partition = MetadataResponse.MetadataResponsePartition
Wanted = list[tuple[str | None, bytes | None]]


def handle(broker: BrokerServices, header: RequestHeader, request: MetadataRequest) -> (
        MetadataResponse | Awaitable[MetadataResponse]):
    waiting = broker.control.caught_up()
    if waiting is not None:
        return _once_caught_up(broker, header, request, waiting)
    return _answer(broker, header, request)


async def _once_caught_up(broker: BrokerServices, header: RequestHeader, request: MetadataRequest,
                          waiting: Awaitable[None]) -> MetadataResponse:
    await waiting
    answer = _answer(broker, header, request)
    return answer if isinstance(answer, MetadataResponse) else await answer


def _answer(broker: BrokerServices, header: RequestHeader, request: MetadataRequest) -> (
        MetadataResponse | Awaitable[MetadataResponse]):
    version = header.api_version
    control = broker.control
    if request.topics is None or (version == 0 and not request.topics):
        wanted: Wanted = [(name, None) for name in control.topic_names()
                          if checks.allowed(broker, checks.METADATA_TOPIC, name)]
    else:
        wanted = [(t.name, t.topic_id) for t in request.topics]
        ids = [t.topic_id for t in request.topics if t.topic_id and t.topic_id != ZERO_UUID]
        if ids and version >= 12:
            # As Kafka: one topic id makes it a request by id, each id answered once and
            # the names beside ignored (Java's AdminClient sends name "" with the ids).
            wanted = [(None, topic_id) for topic_id in dict.fromkeys(ids)]
    allow_create = (request.allow_auto_topic_creation if version >= 4 else True) \
        and broker.config["auto.create.topics.enable"]
    missing = [name for name, _ in wanted if name is not None
               and control.partition_count(name) is None and topic_name_error(name) is None
               and control.may_auto_create(name)
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

    def __init__(self, broker: BrokerServices, request: MetadataRequest, version: int) -> None:
        self.cluster_bits = AUTHORIZED_OPERATIONS_OMITTED
        if 8 <= version <= 10 and request.include_cluster_authorized_operations:
            self.cluster_bits = checks.authorized_operations(broker, ResourceType.CLUSTER, CLUSTER_NAME) \
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


async def _after_creating(broker: BrokerServices, wanted: Wanted, missing: list[str],
                          created: dict[str, int], operations: _AuthorizedOperations) -> MetadataResponse:
    names = list(dict.fromkeys(missing))
    for name, _ in wanted:  # decided now: a coroutine's principal is not guaranteed later
        if name is not None:
            operations.may_describe(name)
    outcomes = await asyncio.gather(*(broker.control.auto_create_topic(name) for name in names))
    return _response(broker, wanted, {**created, **dict(zip(names, outcomes, strict=True))},
                     operations)


def _response(broker: BrokerServices, wanted: Wanted, created: dict[str, int],
              operations: _AuthorizedOperations) -> MetadataResponse:
    control = broker.control
    brokers = control.brokers()
    live = {b.node_id for b in brokers}
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=b.node_id, host=b.host,
                                                         port=b.port, rack=b.rack)
                 for b in brokers],
        cluster_id=control.cluster_id(),
        controller_id=control.controller_id(),
        topics=[_describe(broker, name, topic_id, created, operations, live)
                for name, topic_id in wanted],
        cluster_authorized_operations=operations.cluster_bits,
    )


def _describe(broker: BrokerServices, name: str | None, topic_id: bytes | None,
              created: dict[str, int], operations: _AuthorizedOperations,
              live: set[int]) -> Topic:
    by_id = name is None
    if name is None:
        name = broker.control.topic_for_id(topic_id) if topic_id and topic_id != ZERO_UUID else None
        if name is None:
            if operations.version < 12:  # names are not nullable in v10-11 responses: Kafka refuses these
                return Topic(error_code=ErrorCode.INVALID_REQUEST, name="",
                             topic_id=topic_id or ZERO_UUID, partitions=[])
            return Topic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=topic_id or ZERO_UUID,
                         partitions=[])
    if not operations.may_describe(name):  # existence not revealed; ids are not secret
        return Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=None if by_id else name,
                     topic_id=topic_id if by_id and topic_id else ZERO_UUID, partitions=[])
    topic = _describe_allowed(broker, name, created, live)
    topic.topic_authorized_operations = operations.topic(name)
    return topic


def _describe_allowed(broker: BrokerServices, name: str, created: dict[str, int],
                      live: set[int]) -> Topic:
    control = broker.control
    if control.partition_count(name) is None:
        if topic_name_error(name) is not None:
            return Topic(error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, name=name, partitions=[])
        error = created.get(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return Topic(error_code=error if error != ErrorCode.NONE else ErrorCode.LEADER_NOT_AVAILABLE,
                     name=name, partitions=[])
    return Topic(
        error_code=ErrorCode.NONE, name=name, topic_id=control.topic_id(name) or ZERO_UUID,
        is_internal=name in INTERNAL_TOPICS,
        partitions=[
            Partition(error_code=ErrorCode.NONE if p.leader in live else ErrorCode.LEADER_NOT_AVAILABLE,
                      partition_index=p.index, leader_id=p.leader if p.leader in live else -1,
                      leader_epoch=p.leader_epoch, replica_nodes=p.replicas, isr_nodes=p.isr,
                      offline_replicas=p.offline)
            for p in control.partitions(name)
        ],
    )
