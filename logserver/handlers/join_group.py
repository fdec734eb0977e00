"""JoinGroup: park the request until the rebalance completes (or answer at once).

Version details as Kafka: v0 has no rebalance timeout (the session timeout serves);
v4+ dynamic members first get MEMBER_ID_REQUIRED and a member id (KIP-394); v5+ static
membership; v7+ return the protocol type and a nullable protocol name; v9 may tell a
rejoining static leader to skip the assignment.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import JoinGroupRequest, JoinGroupResponse
from logserver import request_context
from logserver.groups.group import JoinResult
from logserver.groups.respond import respond
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.services import BrokerServices

Member = JoinGroupResponse.JoinGroupResponseMember


def handle(broker: BrokerServices, header: RequestHeader,
           request: JoinGroupRequest) -> JoinGroupResponse | Awaitable[JoinGroupResponse]:
    version = header.api_version
    if not checks.allowed(broker, checks.JOIN_GROUP, request.group_id):
        return _response(JoinResult("", ErrorCode.GROUP_AUTHORIZATION_FAILED), version)
    instance_id = request.group_instance_id if version >= 5 else None
    future = broker.groups.join_group(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=instance_id,
        require_known_member_id=version >= 4 and instance_id is None,
        support_skip_assignment=version >= 9,
        client_id=header.client_id or "",
        client_host=request_context.client_host.get(),
        rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1
        else request.session_timeout_ms,
        session_timeout_ms=request.session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=_unique(request.protocols),
        reason=request.reason if version >= 8 else None,
    )
    return respond(future, lambda result: _response(result, version))


def _unique(protocols: list[JoinGroupRequest.JoinGroupRequestProtocol]) -> list[tuple[str, bytes]]:
    """Protocols by name, first one wins (Kafka keys this collection by name)."""
    seen: dict[str, bytes] = {}
    for protocol in protocols:
        seen.setdefault(protocol.name, bytes(protocol.metadata))
    return list(seen.items())


def _response(result: JoinResult, version: int) -> JoinGroupResponse:
    protocol_name = result.protocol_name
    if version < 7:
        protocol_name = protocol_name or ""  # not nullable before v7
    elif not protocol_name:
        protocol_name = None
    return JoinGroupResponse(
        throttle_time_ms=0,
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[Member(member_id=member_id, group_instance_id=instance_id, metadata=metadata)
                 for member_id, instance_id, metadata in result.members],
    )
