"""DeleteTopics: by name (v1-5) or by name or topic id (v6)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import DeleteTopicsRequest, DeleteTopicsResponse

if TYPE_CHECKING:
    from logserver.broker import Broker

ZERO_UUID = bytes(16)
Result = DeleteTopicsResponse.DeletableTopicResult


def handle(broker: Broker, header: RequestHeader, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    if header.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    return DeleteTopicsResponse(throttle_time_ms=0, responses=[_delete(broker, n, i) for n, i in wanted])


def _delete(broker: Broker, name: str | None, topic_id: bytes) -> Result:
    if name is None:
        name = broker.topic_name_for_id(topic_id)
        if name is None:
            return Result(name=None, topic_id=topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                          error_message="no topic has this id")
    if broker.partition_count(name) is None:
        return Result(name=name, topic_id=topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      error_message=f"topic {name!r} does not exist")
    if not broker.config["delete.topic.enable"]:
        return Result(name=name, topic_id=topic_id, error_code=ErrorCode.TOPIC_DELETION_DISABLED,
                      error_message="delete.topic.enable is false")
    deleted_id = broker.topic_id(name)
    broker.delete_topic(name)
    return Result(name=name, topic_id=deleted_id, error_code=ErrorCode.NONE, error_message=None)
