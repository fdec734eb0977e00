"""Heartbeat: keeps a member's session alive and tells it when to rejoin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import HeartbeatRequest, HeartbeatResponse
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.services import BrokerServices


def handle(broker: BrokerServices, header: RequestHeader, request: HeartbeatRequest) -> HeartbeatResponse:
    if not checks.allowed(broker, checks.HEARTBEAT, request.group_id):
        return HeartbeatResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error = broker.groups.heartbeat(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if header.api_version >= 3 else None,
        generation_id=request.generation_id,
    )
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)
