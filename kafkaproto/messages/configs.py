"""Changing configurations: IncrementalAlterConfigs (44).

Kafka's replacement for AlterConfigs (33): each entry says what to do with one key (set,
delete, append, subtract), so a client changes one setting without restating the rest.
"""

from __future__ import annotations

from ..schema import F
from ..spec import api

# fmt: off

#: ConfigOperation values (Kafka's AlterConfigOp.OpType).
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
        F("ValidateOnly", "bool", "0+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "Responses", "[]AlterConfigsResourceResponse", "0+",
            F("ErrorCode", "int16", "0+"),
            F("ErrorMessage", "string", "0+", nullable="0+"),
            F("ResourceType", "int8", "0+"),
            F("ResourceName", "string", "0+"),
        ),
    ),
)

IncrementalAlterConfigsRequest = INCREMENTAL_ALTER_CONFIGS.request
IncrementalAlterConfigsResponse = INCREMENTAL_ALTER_CONFIGS.response
