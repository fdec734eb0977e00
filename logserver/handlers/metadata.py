"""Metadata: this node as the one broker, controller and leader of every partition.

Auto-creating topics (``auto.create.topics.enable``, the request allowing it) makes the
answer wait for the creation, which runs on the storage worker; a topic that another
request is creating right now is LEADER_NOT_AVAILABLE (clients retry), as in Kafka.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import MetadataRequest, MetadataResponse
from logserver.groups import INTERNAL_TOPICS, OFFSETS_TOPIC
from logserver.partition import LEADER_EPOCH
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
        wanted: Wanted = [(name, None) for name in storage.topic_names()]
    else:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    allow_create = (request.allow_auto_topic_creation if version >= 4 else True) \
        and broker.config["auto.create.topics.enable"]
    missing = [name for name, _ in wanted if name is not None
               and storage.partition_count(name) is None and topic_name_error(name) is None]
    if allow_create and missing:
        return _after_creating(broker, wanted, missing, version)
    return _response(broker, wanted, {}, version)


async def _after_creating(broker: Broker, wanted: Wanted, missing: list[str],
                          version: int) -> MetadataResponse:
    outcomes = await asyncio.gather(*(_auto_create(broker, name) for name in dict.fromkeys(missing)))
    return _response(broker, wanted, dict(zip(dict.fromkeys(missing), outcomes, strict=True)),
                     version)


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
              version: int) -> MetadataResponse:
    host, port = broker.advertised_address
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=broker.node_id, host=host, port=port, rack=None)],
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        topics=[_describe(broker, name, topic_id, created, version) for name, topic_id in wanted],
    )


def _describe(broker: Broker, name: str | None, topic_id: bytes | None,
              created: dict[str, int], version: int) -> Topic:
    storage = broker.storage
    if name is None:
        name = storage.topic_for_id(topic_id) if topic_id and topic_id != ZERO_UUID else None
        if name is None:
            if version < 12:  # names are not nullable in v10-11 responses: Kafka refuses these
                return Topic(error_code=ErrorCode.INVALID_REQUEST, name="",
                             topic_id=topic_id or ZERO_UUID, partitions=[])
            return Topic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=topic_id or ZERO_UUID,
                         partitions=[])
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
