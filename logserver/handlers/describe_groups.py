"""DescribeGroups: state, protocol and members; metadata and assignments once Stable.

An unknown group is described as Dead with no error (Kafka before v6). A group the
principal may not DESCRIBE is GROUP_AUTHORIZATION_FAILED; v3+ may ask for the operations
allowed on each group (READ, DELETE, DESCRIBE; all of them without an authorizer).

A KIP-848 consumer group is shown the way a classic consumer group of the same members
would be: its state, protocol type "consumer", the server-side assignor as the protocol,
and each member's subscription and current assignment in Kafka's consumer protocol
encoding, so tools that only speak DescribeGroups still see who reads what.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import DescribeGroupsRequest, DescribeGroupsResponse
from logserver.admin_cli.consumer_protocol import encode_assignment, encode_subscription
from logserver.groups.consumer.model import ConsumerGroup
from logserver.groups.group import GroupState
from logserver.security import checks
from logserver.security.acl import ResourceType

if TYPE_CHECKING:
    from logserver.services import BrokerServices

Described = DescribeGroupsResponse.DescribedGroup
DescribedMember = DescribeGroupsResponse.DescribedGroupMember


def handle(broker: BrokerServices, header: RequestHeader,
           request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    with_operations = header.api_version >= 3 and request.include_authorized_operations
    described = []
    for group_id in request.groups:
        if not checks.allowed(broker, checks.DESCRIBE_GROUPS, group_id):
            described.append(Described(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                       group_id=group_id, group_state="", protocol_type="",
                                       protocol_data="", members=[]))
            continue
        _, consumer_group = broker.groups.describe_consumer_group(group_id)
        if consumer_group is not None:
            entry = _consumer_view(consumer_group, broker.groups.consumer.settings.assignors[0])
            if with_operations:
                entry.authorized_operations = checks.authorized_operations(
                    broker, ResourceType.GROUP, group_id)
            described.append(entry)
            continue
        error, group = broker.groups.describe_group(group_id)
        entry = Described(error_code=error, group_id=group_id, group_state="",
                          protocol_type="", protocol_data="", members=[])
        if error == ErrorCode.NONE and group is None:
            entry.group_state = GroupState.DEAD.value
        elif group is not None:
            stable = group.is_(GroupState.STABLE) and group.protocol_name is not None
            entry.group_state = group.state.value
            entry.protocol_type = group.protocol_type or ""
            entry.protocol_data = group.protocol_name if stable and group.protocol_name else ""
            entry.members = [
                DescribedMember(
                    member_id=m.member_id, group_instance_id=m.group_instance_id,
                    client_id=m.client_id, client_host=m.client_host,
                    member_metadata=m.metadata(group.protocol_name)
                    if stable and group.protocol_name else b"",
                    member_assignment=m.assignment if stable else b"")
                for m in group.members.values()]
        if with_operations and error == ErrorCode.NONE:
            entry.authorized_operations = checks.authorized_operations(
                broker, ResourceType.GROUP, group_id)
        described.append(entry)
    return DescribeGroupsResponse(throttle_time_ms=0, groups=described)


def _consumer_view(group: ConsumerGroup, default_assignor: str) -> Described:
    return Described(
        error_code=ErrorCode.NONE, group_id=group.group_id, group_state=group.state.value,
        protocol_type="consumer", protocol_data=group.assignor or default_assignor,
        members=[DescribedMember(
            member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
            client_host=m.client_host,
            member_metadata=encode_subscription(list(m.subscribed_names)),
            member_assignment=encode_assignment(
                {t: sorted(ps) for t, ps in sorted(m.assigned.items())}))
            for m in group.members.values()])
