"""DeleteTopics: by name (v1-5) or by name or topic id (v6).

The topic disappears from every answer at once; its files are removed on the storage
worker and the response comes when that is done.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import DeleteTopicsRequest, DeleteTopicsResponse
from logserver.security import checks
from logserver.storage.api import UnknownTopicOrPartitionError

if TYPE_CHECKING:
    from logserver.broker import Broker

log = logging.getLogger(__name__)

ZERO_UUID = bytes(16)
Result = DeleteTopicsResponse.DeletableTopicResult


async def handle(broker: Broker, header: RequestHeader, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    if header.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    results = await asyncio.gather(*(_delete(broker, n, i) for n, i in wanted))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=list(results))


async def _delete(broker: Broker, name: str | None, topic_id: bytes) -> Result:
    storage = broker.storage
    if name is None:
        name = storage.topic_for_id(topic_id)
        if name is None or not checks.allowed(broker, checks.DELETE_TOPICS_BY_ID, name):
            return Result(name=None, topic_id=topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                          error_message="no topic has this id")
    if not checks.allowed(broker, checks.DELETE_TOPICS, name):  # before existence: no leak
        return Result(name=name, topic_id=topic_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                      error_message="not authorized to delete this topic")
    if storage.partition_count(name) is None:
        return Result(name=name, topic_id=topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      error_message=f"topic {name!r} does not exist")
    if not broker.config["delete.topic.enable"]:
        return Result(name=name, topic_id=topic_id, error_code=ErrorCode.TOPIC_DELETION_DISABLED,
                      error_message="delete.topic.enable is false")
    try:
        deleted_id = await broker.delete_topic(name)
    except UnknownTopicOrPartitionError:  # a concurrent request deleted it first
        return Result(name=name, topic_id=topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      error_message=f"topic {name!r} does not exist")
    except OSError as exc:
        log.error("deleting topic %s failed: %s", name, exc)
        return Result(name=name, topic_id=topic_id, error_code=ErrorCode.KAFKA_STORAGE_ERROR,
                      error_message=f"deleting the topic failed: {exc}")
    return Result(name=name, topic_id=deleted_id, error_code=ErrorCode.NONE, error_message=None)
