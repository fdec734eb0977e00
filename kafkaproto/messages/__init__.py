"""Every declared Kafka message class, importable by its Kafka name.

``from kafkaproto.messages import ProduceRequest, FetchResponse``. Nested
structs hang off their message class (``FetchResponse.PartitionData``).
Declarations live in one module per API family; this module only gathers them.
"""

from __future__ import annotations

from ..spec import ApiSpec
from .admin import (
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    DESCRIBE_CONFIGS,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
)
from .api_versions import (
    API_VERSIONS,
    ApiVersionsRequest,
    ApiVersionsResponse,
)
from .configs import (
    INCREMENTAL_ALTER_CONFIGS,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from .fetch import (
    FETCH,
    LIST_OFFSETS,
    OFFSET_FOR_LEADER_EPOCH,
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from .groups import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    SYNC_GROUP,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from .metadata import (
    METADATA,
    MetadataRequest,
    MetadataResponse,
)
from .offsets import (
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from .produce import (
    INIT_PRODUCER_ID,
    PRODUCE,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)

#: Every declared API, in key order.
ALL_APIS: tuple[ApiSpec, ...] = tuple(
    sorted(
        (
            CREATE_TOPICS,
            DELETE_TOPICS,
            DESCRIBE_CONFIGS,
            CREATE_PARTITIONS,
            INCREMENTAL_ALTER_CONFIGS,
            API_VERSIONS,
            FETCH,
            LIST_OFFSETS,
            OFFSET_FOR_LEADER_EPOCH,
            FIND_COORDINATOR,
            JOIN_GROUP,
            HEARTBEAT,
            LEAVE_GROUP,
            SYNC_GROUP,
            DESCRIBE_GROUPS,
            LIST_GROUPS,
            DELETE_GROUPS,
            METADATA,
            OFFSET_COMMIT,
            OFFSET_FETCH,
            OFFSET_DELETE,
            PRODUCE,
            INIT_PRODUCER_ID,
        ),
        key=lambda s: s.api_key,
    )
)

__all__ = [
    "ALL_APIS",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "CreatePartitionsRequest",
    "CreatePartitionsResponse",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "DeleteGroupsRequest",
    "DeleteGroupsResponse",
    "DeleteTopicsRequest",
    "DeleteTopicsResponse",
    "DescribeConfigsRequest",
    "DescribeConfigsResponse",
    "DescribeGroupsRequest",
    "DescribeGroupsResponse",
    "FetchRequest",
    "FetchResponse",
    "FindCoordinatorRequest",
    "FindCoordinatorResponse",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "IncrementalAlterConfigsRequest",
    "IncrementalAlterConfigsResponse",
    "InitProducerIdRequest",
    "InitProducerIdResponse",
    "JoinGroupRequest",
    "JoinGroupResponse",
    "LeaveGroupRequest",
    "LeaveGroupResponse",
    "ListGroupsRequest",
    "ListGroupsResponse",
    "ListOffsetsRequest",
    "ListOffsetsResponse",
    "MetadataRequest",
    "MetadataResponse",
    "OffsetCommitRequest",
    "OffsetCommitResponse",
    "OffsetDeleteRequest",
    "OffsetDeleteResponse",
    "OffsetFetchRequest",
    "OffsetFetchResponse",
    "OffsetForLeaderEpochRequest",
    "OffsetForLeaderEpochResponse",
    "ProduceRequest",
    "ProduceResponse",
    "SyncGroupRequest",
    "SyncGroupResponse",
]
