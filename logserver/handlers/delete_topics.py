"""DeleteTopics: by name (v1-5) or by name or topic id (v6), in both modes.

ACLs, existence and ``delete.topic.enable`` are checked here; ``broker.control`` deletes
the topic (its files on the storage worker on a single node; an etcd transaction in a
cluster, where internal topics cannot be deleted) and the response comes when this
broker's catalog no longer has it. A topic id the principal may not describe is
UNKNOWN_TOPIC_ID: its name is not revealed.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import DeleteTopicsRequest, DeleteTopicsResponse
from logserver.control.api import ControlError
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.services import BrokerServices

ZERO_UUID = bytes(16)
Result = DeleteTopicsResponse.DeletableTopicResult


async def handle(broker: BrokerServices, header: RequestHeader, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    if header.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    results = await asyncio.gather(*(_delete(broker, n, i) for n, i in wanted))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=list(results))


async def _delete(broker: BrokerServices, name: str | None, topic_id: bytes) -> Result:
    control = broker.control
    if name is None:
        name = control.topic_for_id(topic_id)
        if name is None or not checks.allowed(broker, checks.DELETE_TOPICS_BY_ID, name):
            return Result(name=None, topic_id=topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                          error_message="no topic has this id")
    if not checks.allowed(broker, checks.DELETE_TOPICS, name):  # before existence: no leak
        return Result(name=name, topic_id=topic_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                      error_message="not authorized to delete this topic")
    if control.partition_count(name) is None:
        return Result(name=name, topic_id=topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      error_message=f"topic {name!r} does not exist")
    if not broker.config["delete.topic.enable"]:
        return Result(name=name, topic_id=topic_id, error_code=ErrorCode.TOPIC_DELETION_DISABLED,
                      error_message="delete.topic.enable is false")
    try:
        deleted_id = await control.delete_topic(name)
    except ControlError as exc:
        return Result(name=name, topic_id=topic_id, error_code=exc.error, error_message=str(exc))
    return Result(name=name, topic_id=deleted_id, error_code=ErrorCode.NONE, error_message=None)
