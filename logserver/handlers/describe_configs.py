"""DescribeConfigs: topic settings (overrides and inherited defaults) and broker settings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkaproto import ErrorCode, RequestHeader
from kafkaproto.messages import DescribeConfigsRequest, DescribeConfigsResponse
from logserver.broker_overrides import DYNAMIC_BROKER_SETTINGS
from logserver.config import SETTINGS
from logserver.security import checks
from logserver.topic_config import (
    DEFAULT_CONFIG,
    STATIC_BROKER_CONFIG,
    STRING,
    alterable,
    describe,
    format_setting,
    synonyms,
)

if TYPE_CHECKING:
    from logserver.services import BrokerServices

TOPIC = 2
BROKER = 4
Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = DescribeConfigsResponse.DescribeConfigsResourceResult
Synonym = DescribeConfigsResponse.DescribeConfigsSynonym


def handle(broker: BrokerServices, header: RequestHeader, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    results = []
    for resource in request.resources:
        keys = None if resource.configuration_keys is None else set(resource.configuration_keys)
        with_synonyms = request.include_synonyms and header.api_version >= 1
        refused: int = ErrorCode.NONE
        if resource.resource_type == TOPIC:
            refused = checks.denied(broker, checks.DESCRIBE_TOPIC_CONFIGS, resource.resource_name)
        elif resource.resource_type == BROKER:
            refused = checks.denied(broker, checks.DESCRIBE_BROKER_CONFIGS)
        if refused:
            results.append(Result(error_code=refused, error_message=None,
                                  resource_type=resource.resource_type,
                                  resource_name=resource.resource_name, configs=[]))
        elif resource.resource_type == TOPIC:
            results.append(_topic(broker, resource.resource_name, keys, with_synonyms))
        elif resource.resource_type == BROKER:
            results.append(_broker(broker, resource.resource_name, keys, with_synonyms))
        else:
            results.append(Result(error_code=ErrorCode.INVALID_REQUEST,
                                  error_message=f"resource type {resource.resource_type} is not supported",
                                  resource_type=resource.resource_type,
                                  resource_name=resource.resource_name, configs=[]))
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _entry(name: str, value: str | None, source: int, config_type: int,
           read_only: bool = True, synonyms: list[tuple[str, str | None, int]] | None = None,
           sensitive: bool = False) -> Entry:
    return Entry(name=name, value=value, read_only=read_only, config_source=source,
                 is_default=source == DEFAULT_CONFIG, is_sensitive=sensitive,
                 synonyms=[Synonym(name=n, value=v, source=s) for n, v, s in synonyms or ()],
                 config_type=config_type, documentation=None)


def _topic(broker: BrokerServices, name: str, keys: set[str] | None, with_synonyms: bool) -> Result:
    view = broker.control.topic_view(name)  # the cluster's in cluster mode
    if view is None:
        return Result(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      error_message=f"topic {name!r} does not exist", resource_type=TOPIC,
                      resource_name=name, configs=[])
    config, overrides = view
    dynamic = broker.storage.broker_overrides().by_setting()
    entries = [
        _entry(key, value, source, config_type, read_only=not alterable(key),
               synonyms=synonyms(key, overrides, broker.config, broker.config.sources, dynamic)
               if with_synonyms else None)
        for key, value, source, config_type in describe(config, overrides, broker.config,
                                                        broker.config.sources, dynamic)
        if keys is None or key in keys
    ]
    return Result(error_code=ErrorCode.NONE, error_message=None, resource_type=TOPIC,
                  resource_name=name, configs=entries)


def _broker(broker: BrokerServices, name: str, keys: set[str] | None, with_synonyms: bool) -> Result:
    if name not in ("", str(broker.node_id)):
        return Result(error_code=ErrorCode.INVALID_REQUEST, error_message=f"no broker {name!r}",
                      resource_type=BROKER, resource_name=name, configs=[])
    dynamic = broker.storage.broker_overrides()
    entries = []
    for key in SETTINGS:
        if keys is not None and key not in keys:
            continue
        value = broker.config[key]
        static = STATIC_BROKER_CONFIG if key in broker.config.sources else DEFAULT_CONFIG
        if key in SETTINGS and SETTINGS[key].sensitive:  # as Kafka: a password is null, sensitive
            entries.append(_entry(key, None, static, STRING, sensitive=True))
            continue
        text = None if value is None else format_setting(value)
        levels: list[tuple[str, str | None, int]] = [
            (key, v, s) for v, s in dynamic.dynamic_values(key)]
        levels.append((key, text, static))
        if static == STATIC_BROKER_CONFIG and key in SETTINGS and SETTINGS[key].default is not None:
            levels.append((key, SETTINGS[key].default, DEFAULT_CONFIG))
        _, shown, source = levels[0]
        entries.append(_entry(key, shown, source, STRING,
                              read_only=key not in DYNAMIC_BROKER_SETTINGS,
                              synonyms=levels if with_synonyms else None))
    return Result(error_code=ErrorCode.NONE, error_message=None, resource_type=BROKER,
                  resource_name=name, configs=entries)
