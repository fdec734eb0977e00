"""ApiVersions (key 18): the first request of every client connection."""

from __future__ import annotations

from ..schema import F
from ..spec import api

# fmt: off

API_VERSIONS = api(
    18,
    "ApiVersions",
    "0-4",
    flexible="3+",
    request=(
        F("ClientSoftwareName", "string", "3+"),
        F("ClientSoftwareVersion", "string", "3+"),
    ),
    response=(
        F("ErrorCode", "int16", "0+"),
        F(
            "ApiKeys", "[]ApiVersion", "0+",
            F("ApiKey", "int16", "0+"),
            F("MinVersion", "int16", "0+"),
            F("MaxVersion", "int16", "0+"),
        ),
        F("ThrottleTimeMs", "int32", "1+"),
        F(
            "SupportedFeatures", "[]SupportedFeatureKey", "3+",
            F("Name", "string", "3+"),
            F("MinVersion", "int16", "3+"),
            F("MaxVersion", "int16", "3+"),
            tag=0,
        ),
        F("FinalizedFeaturesEpoch", "int64", "3+", default=-1, tag=1),
        F(
            "FinalizedFeatures", "[]FinalizedFeatureKey", "3+",
            F("Name", "string", "3+"),
            F("MaxVersionLevel", "int16", "3+"),
            F("MinVersionLevel", "int16", "3+"),
            tag=2,
        ),
        F("ZkMigrationReady", "bool", "3+", default=False, tag=3),
    ),
)

ApiVersionsRequest = API_VERSIONS.request
ApiVersionsResponse = API_VERSIONS.response
