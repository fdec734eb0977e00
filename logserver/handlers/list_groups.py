"""ListGroups: every group this node coordinates; v4 filters by state, v5 by type
("classic" or "consumer", any case) and says each group's type (KIP-848)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import RequestHeader
from kafkaproto.messages import ListGroupsRequest, ListGroupsResponse
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.services import BrokerServices


def handle(broker: BrokerServices, header: RequestHeader, request: ListGroupsRequest) -> ListGroupsResponse:
    states = request.states_filter if header.api_version >= 4 else []
    types = request.types_filter if header.api_version >= 5 else []
    error, groups = broker.groups.list_groups_typed(states, types)
    if not checks.allowed(broker, checks.LIST_GROUPS_CLUSTER):  # else only describable ones
        groups = [g for g in groups if checks.allowed(broker, checks.LIST_GROUPS_GROUP, g[0])]
    return ListGroupsResponse(throttle_time_ms=0, error_code=error, groups=[
        ListGroupsResponse.ListedGroup(group_id=group_id, protocol_type=protocol_type,
                                       group_state=state, group_type=group_type)
        for group_id, protocol_type, state, group_type in groups])
