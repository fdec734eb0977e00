"""DescribeConfigs: topic settings (overrides and inherited defaults) and broker settings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import DescribeConfigsRequest, DescribeConfigsResponse
from logserver.config import SETTINGS
from logserver.topic_config import (
    DEFAULT_CONFIG,
    STATIC_BROKER_CONFIG,
    STRING,
    describe,
    format_setting,
)

if TYPE_CHECKING:
    from logserver.broker import Broker

TOPIC = 2
BROKER = 4
Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = DescribeConfigsResponse.DescribeConfigsResourceResult


def handle(broker: Broker, header: RequestHeader, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    results = []
    for resource in request.resources:
        keys = None if resource.configuration_keys is None else set(resource.configuration_keys)
        if resource.resource_type == TOPIC:
            results.append(_topic(broker, resource.resource_name, keys))
        elif resource.resource_type == BROKER:
            results.append(_broker(broker, resource.resource_name, keys))
        else:
            results.append(Result(error_code=ErrorCode.INVALID_REQUEST,
                                  error_message=f"resource type {resource.resource_type} is not supported",
                                  resource_type=resource.resource_type,
                                  resource_name=resource.resource_name, configs=[]))
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _entry(name: str, value: str | None, source: int, config_type: int,
           sensitive: bool = False) -> Entry:
    return Entry(name=name, value=value, read_only=source != 1, config_source=source,
                 is_default=source == DEFAULT_CONFIG, is_sensitive=sensitive, synonyms=[],
                 config_type=config_type, documentation=None)


def _topic(broker: Broker, name: str, keys: set[str] | None) -> Result:
    config = broker.storage.topic_config(name)
    overrides = broker.storage.topic_overrides(name)
    if config is None or overrides is None:
        return Result(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      error_message=f"topic {name!r} does not exist", resource_type=TOPIC,
                      resource_name=name, configs=[])
    entries = [
        _entry(key, value, source, config_type)
        for key, value, source, config_type in describe(config, overrides, broker.config,
                                                        broker.config.sources)
        if keys is None or key in keys
    ]
    return Result(error_code=ErrorCode.NONE, error_message=None, resource_type=TOPIC,
                  resource_name=name, configs=entries)


def _broker(broker: Broker, name: str, keys: set[str] | None) -> Result:
    if name not in ("", str(broker.node_id)):
        return Result(error_code=ErrorCode.INVALID_REQUEST, error_message=f"no broker {name!r}",
                      resource_type=BROKER, resource_name=name, configs=[])
    entries = []
    for key in SETTINGS:
        if keys is not None and key not in keys:
            continue
        value = broker.config[key]
        source = STATIC_BROKER_CONFIG if key in broker.config.sources else DEFAULT_CONFIG
        if SETTINGS[key].sensitive:  # as Kafka: a password is reported as null, marked sensitive
            entries.append(_entry(key, None, source, STRING, sensitive=True))
            continue
        entries.append(_entry(key, None if value is None else format_setting(value), source, STRING))
    return Result(error_code=ErrorCode.NONE, error_message=None, resource_type=BROKER,
                  resource_name=name, configs=entries)
