"""ApiVersions: the versions we serve (logserver/handlers/versions.py)."""

from __future__ import annotations

from typing import Any

from kafkaproto import RequestHeader
from kafkaproto.messages import ApiVersionsRequest, ApiVersionsResponse
from logserver.handlers.versions import ADVERTISED


def handle(broker: Any, header: RequestHeader, request: ApiVersionsRequest) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=0,
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=key, min_version=h.min_version, max_version=h.max_version)
            for key, h in sorted(ADVERTISED.items())
        ],
        throttle_time_ms=0,
    )
