"""DeleteGroups: only empty groups (NON_EMPTY_GROUP otherwise); their offsets go too.

Answered once the tombstones are as durable as the durability setting promises, so a
deleted group does not come back after a crash.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import DeleteGroupsRequest, DeleteGroupsResponse
from logserver.groups.respond import respond
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.services import BrokerServices

Result = DeleteGroupsResponse.DeletableGroupResult


def handle(broker: BrokerServices, header: RequestHeader, request: DeleteGroupsRequest) -> (
        DeleteGroupsResponse | Awaitable[DeleteGroupsResponse]):
    refused = {g: ErrorCode.GROUP_AUTHORIZATION_FAILED for g in request.groups_names
               if not checks.allowed(broker, checks.DELETE_GROUPS, g)}
    future = broker.groups.delete_groups([g for g in request.groups_names if g not in refused])
    return respond(future, lambda results: DeleteGroupsResponse(
        throttle_time_ms=0,
        results=[Result(group_id=group_id, error_code=error)
                 for group_id, error in [*refused.items(), *results]]))
