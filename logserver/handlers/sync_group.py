"""SyncGroup: the leader hands in the assignment; every member waits for its share.

v5 requests must name the protocol type and name, and get both echoed (Java checks).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import SyncGroupRequest, SyncGroupResponse
from logserver.groups.group import SyncResult
from logserver.groups.respond import respond
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.services import BrokerServices


def handle(broker: BrokerServices, header: RequestHeader,
           request: SyncGroupRequest) -> SyncGroupResponse | Awaitable[SyncGroupResponse]:
    version = header.api_version
    if not checks.allowed(broker, checks.SYNC_GROUP, request.group_id):
        return _response(SyncResult(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    if version >= 5 and (request.protocol_type is None or request.protocol_name is None):
        return _response(SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
    future = broker.groups.sync_group(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if version >= 3 else None,
        protocol_type=request.protocol_type if version >= 5 else None,
        protocol_name=request.protocol_name if version >= 5 else None,
        assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
    )
    return respond(future, _response)


def _response(result: SyncResult) -> SyncGroupResponse:
    return SyncGroupResponse(throttle_time_ms=0, error_code=result.error,
                             protocol_type=result.protocol_type,
                             protocol_name=result.protocol_name, assignment=result.assignment)
