"""One module per Kafka API; this registry says which versions of each we advertise.

A version is listed only when it is implemented: clients pick min(client max, ours).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafkaproto import ApiKey
from logserver.handlers import (
    api_versions,
    create_topics,
    delete_topics,
    describe_configs,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
)


@dataclass(frozen=True)
class Handler:
    name: str
    min_version: int
    max_version: int
    handle: Callable[..., Any]


HANDLERS: dict[int, Handler] = {
    ApiKey.PRODUCE: Handler("Produce", 3, 9, produce.handle),
    ApiKey.FETCH: Handler("Fetch", 4, 12, fetch.handle),
    ApiKey.LIST_OFFSETS: Handler("ListOffsets", 1, 7, list_offsets.handle),
    ApiKey.METADATA: Handler("Metadata", 0, 12, metadata.handle),
    ApiKey.API_VERSIONS: Handler("ApiVersions", 0, 4, api_versions.handle),
    ApiKey.CREATE_TOPICS: Handler("CreateTopics", 2, 7, create_topics.handle),
    ApiKey.DELETE_TOPICS: Handler("DeleteTopics", 1, 6, delete_topics.handle),
    ApiKey.INIT_PRODUCER_ID: Handler("InitProducerId", 0, 4, init_producer_id.handle),
    ApiKey.DESCRIBE_CONFIGS: Handler("DescribeConfigs", 1, 4, describe_configs.handle),
}
