"""Admin changes to existing topics: DeleteRecords (21), AlterConfigs (33),
DescribeLogDirs (35), IncrementalAlterConfigs (44). CreatePartitions is in admin.py."""

from __future__ import annotations

from ..schema import F
from ..spec import api

# fmt: off

DELETE_RECORDS = api(
    21,
    "DeleteRecords",
    "0-2",
    flexible="2+",
    request=(
        F(
            "Topics", "[]DeleteRecordsTopic", "0+",
            F("Name", "string", "0+"),
            F(
                "Partitions", "[]DeleteRecordsPartition", "0+",
                F("PartitionIndex", "int32", "0+"),
                F("Offset", "int64", "0+"),
            ),
        ),
        F("TimeoutMs", "int32", "0+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "Topics", "[]DeleteRecordsTopicResult", "0+",
            F("Name", "string", "0+"),
            F(
                "Partitions", "[]DeleteRecordsPartitionResult", "0+",
                F("PartitionIndex", "int32", "0+"),
                F("LowWatermark", "int64", "0+"),
                F("ErrorCode", "int16", "0+"),
            ),
        ),
    ),
)

DeleteRecordsRequest = DELETE_RECORDS.request
DeleteRecordsResponse = DELETE_RECORDS.response

ALTER_CONFIGS = api(
    33,
    "AlterConfigs",
    "0-2",
    flexible="2+",
    request=(
        F(
            "Resources", "[]AlterConfigsResource", "0+",
            F("ResourceType", "int8", "0+"),
            F("ResourceName", "string", "0+"),
            F(
                "Configs", "[]AlterableConfig", "0+",
                F("Name", "string", "0+"),
                F("Value", "string", "0+", nullable="0+"),
            ),
        ),
        F("ValidateOnly", "bool", "0+", default=False),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "Responses", "[]AlterConfigsResourceResponse", "0+",
            F("ErrorCode", "int16", "0+"),
            F("ErrorMessage", "string", "0+", nullable="0+", default=None),
            F("ResourceType", "int8", "0+"),
            F("ResourceName", "string", "0+"),
        ),
    ),
)

AlterConfigsRequest = ALTER_CONFIGS.request
AlterConfigsResponse = ALTER_CONFIGS.response

DESCRIBE_LOG_DIRS = api(
    35,
    "DescribeLogDirs",
    "0-4",
    flexible="2+",
    request=(
        F(
            "Topics", "[]DescribableLogDirTopic", "0+",
            F("Topic", "string", "0+"),
            F("Partitions", "[]int32", "0+"),
            nullable="0+",
        ),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "3+"),
        F(
            "Results", "[]DescribeLogDirsResult", "0+",
            F("ErrorCode", "int16", "0+"),
            F("LogDir", "string", "0+"),
            F(
                "Topics", "[]DescribeLogDirsTopic", "0+",
                F("Name", "string", "0+"),
                F(
                    "Partitions", "[]DescribeLogDirsPartition", "0+",
                    F("PartitionIndex", "int32", "0+"),
                    F("PartitionSize", "int64", "0+"),
                    F("OffsetLag", "int64", "0+"),
                    F("IsFutureKey", "bool", "0+"),
                ),
            ),
            F("TotalBytes", "int64", "4+", default=-1),
            F("UsableBytes", "int64", "4+", default=-1),
        ),
    ),
)

DescribeLogDirsRequest = DESCRIBE_LOG_DIRS.request
DescribeLogDirsResponse = DESCRIBE_LOG_DIRS.response

# IncrementalAlterConfigs' ConfigOperation values.
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3

INCREMENTAL_ALTER_CONFIGS = api(
    44,
    "IncrementalAlterConfigs",
    "0-1",
    flexible="1+",
    request=(
        F(
            "Resources", "[]AlterConfigsResource", "0+",
            F("ResourceType", "int8", "0+"),
            F("ResourceName", "string", "0+"),
            F(
                "Configs", "[]AlterableConfig", "0+",
                F("Name", "string", "0+"),
                F("ConfigOperation", "int8", "0+"),
                F("Value", "string", "0+", nullable="0+"),
            ),
        ),
        F("ValidateOnly", "bool", "0+", default=False),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "Responses", "[]AlterConfigsResourceResponse", "0+",
            F("ErrorCode", "int16", "0+"),
            F("ErrorMessage", "string", "0+", nullable="0+", default=None),
            F("ResourceType", "int8", "0+"),
            F("ResourceName", "string", "0+"),
        ),
    ),
)

IncrementalAlterConfigsRequest = INCREMENTAL_ALTER_CONFIGS.request
IncrementalAlterConfigsResponse = INCREMENTAL_ALTER_CONFIGS.response
