"""Topic-level settings (Kafka's names), their broker-level defaults and types.

DescribeConfigs reports them, CreateTopics validates them. A topic override is stored
with the topic; everything else falls back to the broker setting that Kafka uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# DescribeConfigs ConfigType values.
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST = 1, 2, 3, 4, 5, 6, 7
# DescribeConfigs ConfigSource values.
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5


@dataclass(frozen=True)
class TopicSetting:
    name: str
    broker_setting: str | None  # where the default comes from
    default: str
    type: int
    choices: tuple[str, ...] = ()


TOPIC_SETTINGS: dict[str, TopicSetting] = {
    s.name: s
    for s in [
        TopicSetting("cleanup.policy", None, "delete", LIST, ("delete", "compact", "compact,delete", "delete,compact")),
        TopicSetting("compression.type", None, "producer", STRING,
                     ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")),
        TopicSetting("delete.retention.ms", None, "86400000", LONG),
        TopicSetting("file.delete.delay.ms", "log.segment.delete.delay.ms", "60000", LONG),
        TopicSetting("flush.messages", "log.flush.interval.messages", str(2**63 - 1), LONG),
        TopicSetting("flush.ms", "log.flush.interval.ms", str(2**63 - 1), LONG),
        TopicSetting("max.message.bytes", "message.max.bytes", "1048588", INT),
        TopicSetting("message.timestamp.type", "log.message.timestamp.type", "CreateTime", STRING,
                     ("CreateTime", "LogAppendTime")),
        TopicSetting("min.insync.replicas", None, "1", INT),
        TopicSetting("retention.bytes", None, "-1", LONG),
        TopicSetting("retention.ms", None, "604800000", LONG),
        TopicSetting("segment.bytes", "log.segment.bytes", "1073741824", INT),
        TopicSetting("segment.index.bytes", "log.index.size.max.bytes", "10485760", INT),
        TopicSetting("segment.ms", "log.roll.ms", "604800000", LONG),
        TopicSetting("index.interval.bytes", "log.index.interval.bytes", "4096", INT),
        TopicSetting("unclean.leader.election.enable", None, "false", BOOLEAN),
    ]
}


def validate_topic_configs(configs: dict[str, str | None]) -> str | None:
    """Why these overrides cannot be used, or None."""
    for name, value in configs.items():
        setting = TOPIC_SETTINGS.get(name)
        if setting is None:
            return f"unknown topic config {name!r}"
        if value is None:
            return f"topic config {name!r} needs a value"
        if setting.choices and value not in setting.choices:
            return f"topic config {name!r} must be one of {', '.join(setting.choices)}"
        if setting.type in (INT, LONG, SHORT):
            try:
                int(value)
            except ValueError:
                return f"topic config {name!r} must be an integer"
        if setting.type == BOOLEAN and value not in ("true", "false"):
            return f"topic config {name!r} must be true or false"
    return None


def effective_topic_configs(overrides: dict[str, str], broker_config: Any) -> list[tuple[str, str, int]]:
    """(name, value, source) for every topic setting."""
    result = []
    for name, setting in TOPIC_SETTINGS.items():
        if name in overrides:
            result.append((name, overrides[name], DYNAMIC_TOPIC_CONFIG))
            continue
        value: Any = None
        if setting.broker_setting is not None:
            value = broker_config[setting.broker_setting]
        if value is None:
            result.append((name, setting.default, DEFAULT_CONFIG))
        else:
            source = STATIC_BROKER_CONFIG if setting.broker_setting in broker_config.sources else DEFAULT_CONFIG
            result.append((name, _format(value), source))
    return result


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(item) for item in value)
    return str(value)


def format_setting(value: Any) -> str:
    return _format(value)
