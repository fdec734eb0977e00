"""Consumer-group coordination: FindCoordinator (10), JoinGroup (11), Heartbeat (12),
LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16), DeleteGroups (42).
"""

from __future__ import annotations

from ..schema import F
from ..spec import api

# fmt: off

FIND_COORDINATOR = api(
    10,
    "FindCoordinator",
    "0-4",
    flexible="3+",
    request=(
        F("Key", "string", "0-3"),
        F("KeyType", "int8", "1+", default=0),
        F("CoordinatorKeys", "[]string", "4+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "1+"),
        F("ErrorCode", "int16", "0-3"),
        F("ErrorMessage", "string", "1-3", nullable="1-3"),
        F("NodeId", "int32", "0-3"),
        F("Host", "string", "0-3"),
        F("Port", "int32", "0-3"),
        F(
            "Coordinators", "[]Coordinator", "4+",
            F("Key", "string", "4+"),
            F("NodeId", "int32", "4+"),
            F("Host", "string", "4+"),
            F("Port", "int32", "4+"),
            F("ErrorCode", "int16", "4+"),
            F("ErrorMessage", "string", "4+", nullable="4+"),
        ),
    ),
)

FindCoordinatorRequest = FIND_COORDINATOR.request
FindCoordinatorResponse = FIND_COORDINATOR.response

JOIN_GROUP = api(
    11,
    "JoinGroup",
    "0-9",
    flexible="6+",
    request=(
        F("GroupId", "string", "0+"),
        F("SessionTimeoutMs", "int32", "0+"),
        F("RebalanceTimeoutMs", "int32", "1+", default=-1),
        F("MemberId", "string", "0+"),
        F("GroupInstanceId", "string", "5+", nullable="5+", default=None),
        F("ProtocolType", "string", "0+"),
        F(
            "Protocols", "[]JoinGroupRequestProtocol", "0+",
            F("Name", "string", "0+"),
            F("Metadata", "bytes", "0+"),
        ),
        F("Reason", "string", "8+", nullable="8+", default=None),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "2+"),
        F("ErrorCode", "int16", "0+"),
        F("GenerationId", "int32", "0+", default=-1),
        F("ProtocolType", "string", "7+", nullable="7+", default=None),
        F("ProtocolName", "string", "0+", nullable="7+"),
        F("Leader", "string", "0+"),
        F("SkipAssignment", "bool", "9+", default=False),
        F("MemberId", "string", "0+"),
        F(
            "Members", "[]JoinGroupResponseMember", "0+",
            F("MemberId", "string", "0+"),
            F("GroupInstanceId", "string", "5+", nullable="5+", default=None),
            F("Metadata", "bytes", "0+"),
        ),
    ),
)

JoinGroupRequest = JOIN_GROUP.request
JoinGroupResponse = JOIN_GROUP.response

HEARTBEAT = api(
    12,
    "Heartbeat",
    "0-4",
    flexible="4+",
    request=(
        F("GroupId", "string", "0+"),
        F("GenerationId", "int32", "0+"),
        F("MemberId", "string", "0+"),
        F("GroupInstanceId", "string", "3+", nullable="3+", default=None),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "1+"),
        F("ErrorCode", "int16", "0+"),
    ),
)

HeartbeatRequest = HEARTBEAT.request
HeartbeatResponse = HEARTBEAT.response

LEAVE_GROUP = api(
    13,
    "LeaveGroup",
    "0-5",
    flexible="4+",
    request=(
        F("GroupId", "string", "0+"),
        F("MemberId", "string", "0-2"),
        F(
            "Members", "[]MemberIdentity", "3+",
            F("MemberId", "string", "3+"),
            F("GroupInstanceId", "string", "3+", nullable="3+", default=None),
            F("Reason", "string", "5+", nullable="5+", default=None),
        ),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "1+"),
        F("ErrorCode", "int16", "0+"),
        F(
            "Members", "[]MemberResponse", "3+",
            F("MemberId", "string", "3+"),
            F("GroupInstanceId", "string", "3+", nullable="3+"),
            F("ErrorCode", "int16", "3+"),
        ),
    ),
)

LeaveGroupRequest = LEAVE_GROUP.request
LeaveGroupResponse = LEAVE_GROUP.response

SYNC_GROUP = api(
    14,
    "SyncGroup",
    "0-5",
    flexible="4+",
    request=(
        F("GroupId", "string", "0+"),
        F("GenerationId", "int32", "0+"),
        F("MemberId", "string", "0+"),
        F("GroupInstanceId", "string", "3+", nullable="3+", default=None),
        F("ProtocolType", "string", "5+", nullable="5+", default=None),
        F("ProtocolName", "string", "5+", nullable="5+", default=None),
        F(
            "Assignments", "[]SyncGroupRequestAssignment", "0+",
            F("MemberId", "string", "0+"),
            F("Assignment", "bytes", "0+"),
        ),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "1+"),
        F("ErrorCode", "int16", "0+"),
        F("ProtocolType", "string", "5+", nullable="5+", default=None),
        F("ProtocolName", "string", "5+", nullable="5+", default=None),
        F("Assignment", "bytes", "0+"),
    ),
)

SyncGroupRequest = SYNC_GROUP.request
SyncGroupResponse = SYNC_GROUP.response

#: Kafka's "authorized operations not requested" marker (INT32_MIN).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)

DESCRIBE_GROUPS = api(
    15,
    "DescribeGroups",
    "0-5",
    flexible="5+",
    request=(
        F("Groups", "[]string", "0+"),
        F("IncludeAuthorizedOperations", "bool", "3+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "1+"),
        F(
            "Groups", "[]DescribedGroup", "0+",
            F("ErrorCode", "int16", "0+"),
            F("GroupId", "string", "0+"),
            F("GroupState", "string", "0+"),
            F("ProtocolType", "string", "0+"),
            F("ProtocolData", "string", "0+"),
            F(
                "Members", "[]DescribedGroupMember", "0+",
                F("MemberId", "string", "0+"),
                F("GroupInstanceId", "string", "4+", nullable="4+", default=None),
                F("ClientId", "string", "0+"),
                F("ClientHost", "string", "0+"),
                F("MemberMetadata", "bytes", "0+"),
                F("MemberAssignment", "bytes", "0+"),
            ),
            F("AuthorizedOperations", "int32", "3+", default=AUTHORIZED_OPERATIONS_OMITTED),
        ),
    ),
)

DescribeGroupsRequest = DESCRIBE_GROUPS.request
DescribeGroupsResponse = DESCRIBE_GROUPS.response

LIST_GROUPS = api(
    16,
    "ListGroups",
    "0-5",
    flexible="3+",
    request=(
        F("StatesFilter", "[]string", "4+"),
        F("TypesFilter", "[]string", "5+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "1+"),
        F("ErrorCode", "int16", "0+"),
        F(
            "Groups", "[]ListedGroup", "0+",
            F("GroupId", "string", "0+"),
            F("ProtocolType", "string", "0+"),
            F("GroupState", "string", "4+"),
            F("GroupType", "string", "5+"),
        ),
    ),
)

ListGroupsRequest = LIST_GROUPS.request
ListGroupsResponse = LIST_GROUPS.response

DELETE_GROUPS = api(
    42,
    "DeleteGroups",
    "0-2",
    flexible="2+",
    request=(
        F("GroupsNames", "[]string", "0+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "Results", "[]DeletableGroupResult", "0+",
            F("GroupId", "string", "0+"),
            F("ErrorCode", "int16", "0+"),
        ),
    ),
)

DeleteGroupsRequest = DELETE_GROUPS.request
DeleteGroupsResponse = DELETE_GROUPS.response
