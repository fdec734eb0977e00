"""LeaveGroup: one member (v0-2) or a batch, also by group.instance.id (v3+, KIP-345).

v0-2 responses carry one error: the top-level one, else the member's, as Kafka does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import LeaveGroupRequest, LeaveGroupResponse
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.services import BrokerServices

MemberResponse = LeaveGroupResponse.MemberResponse


def handle(broker: BrokerServices, header: RequestHeader, request: LeaveGroupRequest) -> LeaveGroupResponse:
    version = header.api_version
    if not checks.allowed(broker, checks.LEAVE_GROUP, request.group_id):
        return LeaveGroupResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                  members=[])
    if version <= 2:
        leaving: list[tuple[str, str | None, str | None]] = [(request.member_id, None, None)]
    else:
        leaving = [(m.member_id, m.group_instance_id, m.reason if version >= 5 else None)
                   for m in request.members]
    error, results = broker.groups.leave_group(request.group_id, leaving)
    if version <= 2:
        if error == ErrorCode.NONE:
            error = next((e for _, _, e in results if e != ErrorCode.NONE), ErrorCode.NONE)
        return LeaveGroupResponse(throttle_time_ms=0, error_code=error)
    return LeaveGroupResponse(
        throttle_time_ms=0, error_code=error,
        members=[MemberResponse(member_id=m, group_instance_id=i, error_code=e)
                 for m, i, e in results])
