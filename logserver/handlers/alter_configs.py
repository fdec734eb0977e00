"""AlterConfigs (33) and IncrementalAlterConfigs (44): change topic configs at run time.

The new override set is validated as CreateTopics validates (INVALID_CONFIG for an
unknown name or a bad value, per resource), persisted, and applied at once (retention,
segment rolls, max.message.bytes, timestamp type, cleanup policy). ``validate_only``
checks without changing anything. Broker settings are static (the config file): a change
to one is refused with Kafka's answer for a setting that cannot change dynamically.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from logserver.config_changes import ConfigChangeError, incremental, replacement
from logserver.storage.api import InvalidConfigError, UnknownTopicOrPartitionError
from logserver.topic_config import describe, validate_overrides

if TYPE_CHECKING:
    from logserver.broker import Broker

log = logging.getLogger(__name__)

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8

# The new override set from the current one (raises ConfigChangeError).
Change = Callable[[Mapping[str, str], Mapping[str, str]], dict[str, str]]


async def handle_alter(broker: Broker, header: RequestHeader,
                       request: AlterConfigsRequest) -> AlterConfigsResponse:
    responses = []
    for resource in request.resources:
        configs = [(c.name, c.value) for c in resource.configs]

        def replace(current: Mapping[str, str], effective: Mapping[str, str],
                    configs: list[tuple[str, str | None]] = configs) -> dict[str, str]:
            return replacement(configs)

        code, message = await _apply(broker, resource.resource_type, resource.resource_name,
                                     [name for name, _ in configs], replace, request.validate_only)
        responses.append(AlterConfigsResponse.AlterConfigsResourceResponse(
            error_code=code, error_message=message, resource_type=resource.resource_type,
            resource_name=resource.resource_name))
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)


async def handle_incremental(broker: Broker, header: RequestHeader,
                             request: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    responses = []
    for resource in request.resources:
        ops = [(c.name, c.config_operation, c.value) for c in resource.configs]

        def change(current: Mapping[str, str], effective: Mapping[str, str],
                   ops: list[tuple[str, int, str | None]] = ops) -> dict[str, str]:
            return incremental(current, ops, effective)

        code, message = await _apply(broker, resource.resource_type, resource.resource_name,
                                     [name for name, _, _ in ops], change, request.validate_only)
        responses.append(IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
            error_code=code, error_message=message, resource_type=resource.resource_type,
            resource_name=resource.resource_name))
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)


async def _apply(broker: Broker, resource_type: int, name: str, keys: list[str], change: Change,
                 validate_only: bool) -> tuple[int, str | None]:
    if resource_type in (BROKER, BROKER_LOGGER):
        if name not in ("", str(broker.node_id)):
            return ErrorCode.INVALID_REQUEST, f"no broker {name!r}"
        if not keys:
            return ErrorCode.NONE, None
        return (ErrorCode.INVALID_REQUEST,
                f"Cannot update these configs dynamically: {sorted(set(keys))} (broker settings "
                f"are read from the config file at start-up)")
    if resource_type != TOPIC:
        return ErrorCode.INVALID_REQUEST, f"resource type {resource_type} is not supported"
    storage = broker.storage
    current = storage.topic_overrides(name)
    config = storage.topic_config(name)
    if current is None or config is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
    effective = {key: value for key, value, _, _ in describe(config, current, broker.config,
                                                             broker.config.sources)}
    try:
        overrides = validate_overrides(change(current, effective))
    except ConfigChangeError as exc:
        return exc.code, str(exc)
    except InvalidConfigError as exc:
        return ErrorCode.INVALID_CONFIG, str(exc)
    if validate_only:
        return ErrorCode.NONE, None
    try:
        await storage.alter_topic_config(name, overrides)
    except UnknownTopicOrPartitionError as exc:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, str(exc)
    except InvalidConfigError as exc:
        return ErrorCode.INVALID_CONFIG, str(exc)
    except OSError as exc:
        log.error("changing the configs of topic %s failed: %s", name, exc)
        return ErrorCode.KAFKA_STORAGE_ERROR, f"storing the configs failed: {exc}"
    return ErrorCode.NONE, None
