"""Topic administration: CreateTopics (19), DeleteTopics (20), DescribeConfigs (32)."""

from __future__ import annotations

from ..schema import F
from ..spec import api

# fmt: off

CREATE_TOPICS = api(
    19,
    "CreateTopics",
    "0-7",
    flexible="5+",
    request=(
        F(
            "Topics", "[]CreatableTopic", "0+",
            F("Name", "string", "0+"),
            F("NumPartitions", "int32", "0+"),
            F("ReplicationFactor", "int16", "0+"),
            F(
                "Assignments", "[]CreatableReplicaAssignment", "0+",
                F("PartitionIndex", "int32", "0+"),
                F("BrokerIds", "[]int32", "0+"),
            ),
            F(
                "Configs", "[]CreatableTopicConfig", "0+",
                F("Name", "string", "0+"),
                F("Value", "string", "0+", nullable="0+"),
            ),
        ),
        F("timeoutMs", "int32", "0+", default=60000),
        F("validateOnly", "bool", "1+", default=False),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "2+"),
        F(
            "Topics", "[]CreatableTopicResult", "0+",
            F("Name", "string", "0+"),
            F("TopicId", "uuid", "7+"),
            F("ErrorCode", "int16", "0+"),
            F("ErrorMessage", "string", "1+", nullable="0+"),
            F("TopicConfigErrorCode", "int16", "5+", tag=0),
            F("NumPartitions", "int32", "5+", default=-1),
            F("ReplicationFactor", "int16", "5+", default=-1),
            F(
                "Configs", "[]CreatableTopicConfigs", "5+",
                F("Name", "string", "5+"),
                F("Value", "string", "5+", nullable="5+"),
                F("ReadOnly", "bool", "5+"),
                F("ConfigSource", "int8", "5+", default=-1),
                F("IsSensitive", "bool", "5+"),
                nullable="5+",
            ),
        ),
    ),
)

CreateTopicsRequest = CREATE_TOPICS.request
CreateTopicsResponse = CREATE_TOPICS.response

DELETE_TOPICS = api(
    20,
    "DeleteTopics",
    "0-6",
    flexible="4+",
    request=(
        F(
            "Topics", "[]DeleteTopicState", "6+",
            F("Name", "string", "6+", nullable="6+", default=None),
            F("TopicId", "uuid", "6+"),
        ),
        F("TopicNames", "[]string", "0-5"),
        F("TimeoutMs", "int32", "0+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "1+"),
        F(
            "Responses", "[]DeletableTopicResult", "0+",
            F("Name", "string", "0+", nullable="6+"),
            F("TopicId", "uuid", "6+"),
            F("ErrorCode", "int16", "0+"),
            F("ErrorMessage", "string", "5+", nullable="5+", default=None),
        ),
    ),
)

DeleteTopicsRequest = DELETE_TOPICS.request
DeleteTopicsResponse = DELETE_TOPICS.response

DESCRIBE_CONFIGS = api(
    32,
    "DescribeConfigs",
    "0-4",
    flexible="4+",
    request=(
        F(
            "Resources", "[]DescribeConfigsResource", "0+",
            F("ResourceType", "int8", "0+"),
            F("ResourceName", "string", "0+"),
            F("ConfigurationKeys", "[]string", "0+", nullable="0+"),
        ),
        F("IncludeSynonyms", "bool", "1+", default=False),
        F("IncludeDocumentation", "bool", "3+", default=False),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "Results", "[]DescribeConfigsResult", "0+",
            F("ErrorCode", "int16", "0+"),
            F("ErrorMessage", "string", "0+", nullable="0+"),
            F("ResourceType", "int8", "0+"),
            F("ResourceName", "string", "0+"),
            F(
                "Configs", "[]DescribeConfigsResourceResult", "0+",
                F("Name", "string", "0+"),
                F("Value", "string", "0+", nullable="0+"),
                F("ReadOnly", "bool", "0+"),
                F("ConfigSource", "int8", "1+", default=-1),
                F("IsDefault", "bool", "0"),
                F("IsSensitive", "bool", "0+"),
                F(
                    "Synonyms", "[]DescribeConfigsSynonym", "1+",
                    F("Name", "string", "1+"),
                    F("Value", "string", "1+", nullable="0+"),
                    F("Source", "int8", "1+"),
                ),
                F("ConfigType", "int8", "3+", default=0),
                F("Documentation", "string", "3+", nullable="0+"),
            ),
        ),
    ),
)

DescribeConfigsRequest = DESCRIBE_CONFIGS.request
DescribeConfigsResponse = DESCRIBE_CONFIGS.response

CREATE_PARTITIONS = api(
    37,
    "CreatePartitions",
    "0-3",
    flexible="2+",
    request=(
        F(
            "Topics", "[]CreatePartitionsTopic", "0+",
            F("Name", "string", "0+"),
            F("Count", "int32", "0+"),
            F(
                "Assignments", "[]CreatePartitionsAssignment", "0+",
                F("BrokerIds", "[]int32", "0+"),
                nullable="0+",
            ),
        ),
        F("TimeoutMs", "int32", "0+"),
        F("ValidateOnly", "bool", "0+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "Results", "[]CreatePartitionsTopicResult", "0+",
            F("Name", "string", "0+"),
            F("ErrorCode", "int16", "0+"),
            F("ErrorMessage", "string", "0+", nullable="0+", default=None),
        ),
    ),
)

CreatePartitionsRequest = CREATE_PARTITIONS.request
CreatePartitionsResponse = CREATE_PARTITIONS.response
