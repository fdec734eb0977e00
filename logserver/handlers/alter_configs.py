"""AlterConfigs (33) and IncrementalAlterConfigs (44): change configs at run time.

Topics: the new override set is validated as CreateTopics validates (INVALID_CONFIG for
an unknown name or a bad value, per resource), persisted, and applied at once (retention,
segment rolls, max.message.bytes, timestamp type, cleanup policy). Brokers: the dynamic
broker configs of logserver.broker_overrides (cluster default "" or this node id); any
other broker setting gets Kafka's answer for one that cannot change dynamically.
``validate_only`` checks without changing anything. AlterConfigs replaces a resource's
whole override set, IncrementalAlterConfigs edits it (logserver.config_changes).
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
from logserver.broker_overrides import (
    DYNAMIC_BROKER_SETTINGS,
    BrokerOverrides,
    Overlay,
    StaticBrokerConfigError,
    validate_broker_overrides,
)
from logserver.cluster.errors import MetadataUnavailableError
from logserver.config_changes import ConfigChangeError, incremental, replacement
from logserver.security import checks
from logserver.storage.api import InvalidConfigError, UnknownTopicOrPartitionError
from logserver.topic_config import LIST, describe, format_setting, setting_value, validate_overrides

if TYPE_CHECKING:
    from logserver.services import BrokerServices

# The broker settings of list type (APPEND / SUBTRACT apply to them).
BROKER_LISTS = {name for name, setting in DYNAMIC_BROKER_SETTINGS.items() if setting.type == LIST}

log = logging.getLogger(__name__)

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8

# The new override set from the current one, the effective values and the list settings
# (raises ConfigChangeError).
Change = Callable[[Mapping[str, str], Mapping[str, str], "set[str] | None"], dict[str, str]]


async def handle_alter(broker: BrokerServices, header: RequestHeader,
                       request: AlterConfigsRequest) -> AlterConfigsResponse:
    responses = []
    for resource in request.resources:
        configs = [(c.name, c.value) for c in resource.configs]

        def replace(current: Mapping[str, str], effective: Mapping[str, str], lists: set[str] | None,
                    configs: list[tuple[str, str | None]] = configs) -> dict[str, str]:
            return replacement(configs)

        code, message = await _apply(broker, resource.resource_type, resource.resource_name,
                                     [name for name, _ in configs], replace, request.validate_only)
        responses.append(AlterConfigsResponse.AlterConfigsResourceResponse(
            error_code=code, error_message=message, resource_type=resource.resource_type,
            resource_name=resource.resource_name))
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)


async def handle_incremental(broker: BrokerServices, header: RequestHeader,
                             request: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    responses = []
    for resource in request.resources:
        ops = [(c.name, c.config_operation, c.value) for c in resource.configs]

        def change(current: Mapping[str, str], effective: Mapping[str, str], lists: set[str] | None,
                   ops: list[tuple[str, int, str | None]] = ops) -> dict[str, str]:
            return incremental(current, ops, effective, lists)

        code, message = await _apply(broker, resource.resource_type, resource.resource_name,
                                     [name for name, _, _ in ops], change, request.validate_only)
        responses.append(IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
            error_code=code, error_message=message, resource_type=resource.resource_type,
            resource_name=resource.resource_name))
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)


async def _apply(broker: BrokerServices, resource_type: int, name: str, keys: list[str], change: Change,
                 validate_only: bool) -> tuple[int, str | None]:
    refused = (checks.denied(broker, checks.ALTER_TOPIC_CONFIGS, name) if resource_type == TOPIC
               else checks.denied(broker, checks.ALTER_BROKER_CONFIGS))
    if refused:
        return refused, None
    if resource_type == BROKER:
        return await _apply_broker(broker, name, change, validate_only)
    if resource_type == BROKER_LOGGER:
        if not keys:
            return ErrorCode.NONE, None
        return ErrorCode.INVALID_REQUEST, "broker logger levels cannot be changed at run time here"
    if resource_type != TOPIC:
        return ErrorCode.INVALID_REQUEST, f"resource type {resource_type} is not supported"
    view = broker.control.topic_view(name)  # the cluster's in cluster mode
    if view is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
    config, current = view
    effective = {key: value for key, value, _, _ in describe(config, current, broker.config,
                                                             broker.config.sources)}
    try:
        overrides = validate_overrides(change(current, effective, None))
    except ConfigChangeError as exc:
        return exc.code, str(exc)
    except InvalidConfigError as exc:
        return ErrorCode.INVALID_CONFIG, str(exc)
    if validate_only:
        return ErrorCode.NONE, None
    try:
        await broker.control.alter_topic_configs(name, overrides)  # cluster-wide in a cluster
    except UnknownTopicOrPartitionError as exc:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, str(exc)
    except InvalidConfigError as exc:
        return ErrorCode.INVALID_CONFIG, str(exc)
    except MetadataUnavailableError as exc:  # cluster mode: etcd did not take it
        return ErrorCode.REQUEST_TIMED_OUT, str(exc)
    except OSError as exc:
        log.error("changing the configs of topic %s failed: %s", name, exc)
        return ErrorCode.KAFKA_STORAGE_ERROR, f"storing the configs failed: {exc}"
    return ErrorCode.NONE, None


async def _apply_broker(broker: BrokerServices, name: str, change: Change,
                        validate_only: bool) -> tuple[int, str | None]:
    """Dynamic broker configs: "" is the cluster-wide default, the node id this broker."""
    if name not in ("", str(broker.node_id)):
        return ErrorCode.INVALID_REQUEST, f"no broker {name!r}"
    storage = broker.storage
    current = storage.broker_overrides()
    level = current.cluster_default if name == "" else current.this_broker
    wanted = broker.control.wanted_broker_defaults() if name == "" else None
    if wanted is not None:
        level = wanted  # the cluster's, maybe newer than ours
    overlay = Overlay(broker.config, current.effective())
    effective = {key: format_setting(value) for key in DYNAMIC_BROKER_SETTINGS
                 if (value := setting_value(overlay, key)) is not None}
    try:
        new_level = validate_broker_overrides(change(level, effective, BROKER_LISTS))
    except ConfigChangeError as exc:
        return exc.code, str(exc)
    except StaticBrokerConfigError as exc:
        return ErrorCode.INVALID_REQUEST, str(exc)
    except InvalidConfigError as exc:
        return ErrorCode.INVALID_CONFIG, str(exc)
    if validate_only:
        return ErrorCode.NONE, None
    if name == "":
        updated = BrokerOverrides(new_level, current.this_broker)
    else:
        updated = BrokerOverrides(current.cluster_default, new_level)
    try:
        # the cluster-wide default, in etcd in a cluster; else this broker's own
        if name != "" or not await broker.control.alter_broker_defaults(new_level):
            await storage.alter_broker_overrides(updated)
    except MetadataUnavailableError as exc:  # cluster mode: etcd did not take it
        return ErrorCode.REQUEST_TIMED_OUT, str(exc)
    except OSError as exc:
        log.error("changing the dynamic broker configs failed: %s", exc)
        return ErrorCode.KAFKA_STORAGE_ERROR, f"storing the configs failed: {exc}"
    return ErrorCode.NONE, None
