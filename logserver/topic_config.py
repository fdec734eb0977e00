"""One resolved topic configuration: broker defaults plus topic overrides, typed and frozen.

``TOPIC_SETTINGS`` is the only table of topic-level settings: Kafka's topic name, the
``TopicConfig`` field it sets, the broker setting its default comes from, how a value is
parsed, and the DescribeConfigs type. The broker's own ``log.*`` defaults are parsed with
the same parsers (logserver.config), the log reads ``TopicConfig`` attributes, CreateTopics
validates with ``validate_overrides`` and DescribeConfigs reports ``describe``.

Settings the server does not apply per topic (``flush.messages``, ``flush.ms``,
``compression.type``, ``min.insync.replicas``, ``unclean.leader.election.enable``) are
still described with the value that really holds, but an override of them is refused
with INVALID_CONFIG instead of being stored and echoed as if honoured. Topics stored
with such an override by an older version still load; the key is ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

log = logging.getLogger(__name__)

__all__ = [
    "TOPIC_SETTINGS",
    "InvalidConfigError",
    "TopicConfig",
    "TopicSetting",
    "describe",
    "format_setting",
    "validate_overrides",
]

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
_DAY_MS = 86_400_000
_WEEK_MS = 7 * _DAY_MS

# DescribeConfigs ConfigType values.
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST = 1, 2, 3, 4, 5, 6, 7
# DescribeConfigs ConfigSource values.
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5


class InvalidConfigError(ValueError):
    """A topic override that is unknown, not applied by this server, or has a bad value."""


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """Everything the server applies to one topic's partitions; defaults are Kafka's.

    Field names are what the log code reads (``segment_bytes``, ``roll_ms``, ...); the
    Kafka names are in ``TOPIC_SETTINGS``.
    """

    cleanup_policy: str = "delete"  # cleanup.policy
    delete_retention_ms: int = _DAY_MS  # delete.retention.ms: how long tombstones stay
    max_message_bytes: int = 1_048_588  # max.message.bytes
    message_timestamp_type: str = "CreateTime"  # message.timestamp.type
    # KIP-937: how far a CreateTime may lie behind / ahead of the broker's clock (the
    # "after" default is Kafka 4's, one hour; 3.6-3.9 had no limit).
    message_timestamp_before_max_ms: int = LONG_MAX  # message.timestamp.before.max.ms
    message_timestamp_after_max_ms: int = 3_600_000  # message.timestamp.after.max.ms
    retention_bytes: int = -1  # retention.bytes; -1: no size limit
    retention_ms: int = _WEEK_MS  # retention.ms; -1: keep forever
    segment_bytes: int = 1 << 30  # segment.bytes
    roll_ms: int = _WEEK_MS  # segment.ms
    index_max_bytes: int = 10 << 20  # segment.index.bytes
    index_interval_bytes: int = 4096  # index.interval.bytes
    producer_id_expiration_ms: int = _DAY_MS  # broker-wide (producer.id.expiration.ms)
    file_delete_delay_ms: int = 60_000  # file.delete.delay.ms: deleted files linger this long

    def __post_init__(self) -> None:
        # Positions in the offset index are u32, and Kafka caps segments at 2 GiB too.
        if not 14 <= self.segment_bytes <= INT_MAX:
            raise ValueError(f"segment.bytes must be in [14, 2**31-1], got {self.segment_bytes}")
        if self.roll_ms <= 0:
            raise ValueError(f"segment.ms must be positive, got {self.roll_ms}")
        if self.index_max_bytes < 12:
            raise ValueError(f"segment.index.bytes must be >= 12, got {self.index_max_bytes}")
        if self.index_interval_bytes < 0:
            raise ValueError(f"index.interval.bytes must be >= 0, got {self.index_interval_bytes}")

    # -- derived views ------------------------------------------------------------------

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def segment_ms(self) -> int:
        return self.roll_ms

    @property
    def segment_index_bytes(self) -> int:
        return self.index_max_bytes

    # -- resolution -----------------------------------------------------------------------

    @classmethod
    def from_settings(cls, broker: Mapping[str, Any] | object | None = None,
                      topic: Mapping[str, Any] | None = None) -> TopicConfig:
        """Broker defaults (a mapping by Kafka name, e.g. the server's Config) plus topic
        overrides; unknown and refused override names are ignored."""
        values: dict[str, Any] = {}
        if broker is not None:
            for setting in TOPIC_SETTINGS.values():
                if setting.field is None or setting.broker_setting is None:
                    continue
                raw = setting_value(broker, setting.broker_setting)
                if raw is not None:
                    values[setting.field] = setting.parse(format_setting(raw))
            raw = setting_value(broker, "producer.id.expiration.ms")
            if raw is not None:
                values["producer_id_expiration_ms"] = int(raw)
        return cls(**values).with_overrides(topic)

    def with_overrides(self, topic: Mapping[str, Any] | None) -> TopicConfig:
        """This config with the applied topic overrides; others are ignored (see
        ``ignored_overrides``). A bad value raises ValueError."""
        values = {}
        for name, raw in (topic or {}).items():
            setting = TOPIC_SETTINGS.get(name)
            if setting is None or setting.field is None or raw is None:
                continue
            values[setting.field] = setting.parse(str(raw))
        return replace(self, **values) if values else self

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def ignored_overrides(overrides: Mapping[str, Any]) -> list[str]:
    """Stored override names that ``with_overrides`` ignores (unknown or refused)."""
    return sorted(name for name in overrides
                  if name not in TOPIC_SETTINGS or TOPIC_SETTINGS[name].field is None)


def validate_overrides(overrides: Mapping[str, str | None]) -> dict[str, str]:
    """The overrides as they will be stored (canonical text), or InvalidConfigError."""
    canonical: dict[str, str] = {}
    for name, raw in overrides.items():
        setting = TOPIC_SETTINGS.get(name)
        if setting is None:
            raise InvalidConfigError(f"unknown topic config {name!r}")
        if setting.field is None:
            raise InvalidConfigError(f"topic config {name!r} is not supported by this server: "
                                     f"{setting.refusal}")
        if raw is None:
            raise InvalidConfigError(f"topic config {name!r} needs a value")
        try:
            canonical[name] = format_setting(setting.parse(raw))
        except ValueError as exc:
            raise InvalidConfigError(f"invalid value {raw!r} for topic config {name!r}: {exc}") from None
    try:
        TopicConfig().with_overrides(canonical)  # cross-field invariants
    except ValueError as exc:
        raise InvalidConfigError(str(exc)) from None
    return canonical


def describe(config: TopicConfig, overrides: Mapping[str, str],
             broker: Mapping[str, Any], broker_sources: Iterable[str]
             ) -> list[tuple[str, str, int, int]]:
    """(name, value, ConfigSource, ConfigType) for every topic setting, as DescribeConfigs
    and CreateTopics report them: the value that really applies and where it came from."""
    explicit = set(broker_sources)
    result = []
    for name, setting in TOPIC_SETTINGS.items():
        if setting.field is not None and name in overrides:
            result.append((name, format_setting(getattr(config, setting.field)),
                           DYNAMIC_TOPIC_CONFIG, setting.type))
            continue
        source = STATIC_BROKER_CONFIG if setting.broker_setting in explicit else DEFAULT_CONFIG
        if setting.field is not None:
            value = format_setting(getattr(config, setting.field))
        else:
            raw = setting_value(broker, setting.broker_setting) if setting.broker_setting else None
            value = setting.fixed if raw is None else format_setting(raw)
            if raw is None:
                source = DEFAULT_CONFIG
        result.append((name, value, source, setting.type))
    return result


# -- parsers (shared with the broker's log.* settings in logserver.config) --------------------


def int_in(low: int, high: int = LONG_MAX) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text.strip())
        if not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}, got {value}")
        return value

    return parse


def choice(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        for option in choices:
            if text.strip().lower() == option.lower():
                return option
        raise ValueError(f"must be one of {', '.join(choices)}, got {text!r}")

    return parse


def parse_cleanup_policy(text: str) -> str:
    """``delete``, ``compact`` or both (either order); canonical ``compact,delete``."""
    parts = {part.strip().lower() for part in text.split(",") if part.strip()}
    if not parts or not parts <= {"delete", "compact"}:
        raise ValueError(f"must be delete, compact or compact,delete, got {text!r}")
    return ",".join(sorted(parts))


def format_setting(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(item) for item in value)
    return str(value)


def setting_value(source: Mapping[str, Any] | object | None, name: str) -> Any:
    """One broker setting by Kafka name from a mapping, an object with ``get``, or an
    object with attributes named with underscores; None when absent."""
    if source is None:
        return None
    if isinstance(source, Mapping):
        return source.get(name)
    getter = getattr(source, "get", None)
    if callable(getter):
        try:
            return getter(name)
        except (KeyError, TypeError):
            pass
    return getattr(source, name.replace(".", "_"), None)


def _refused(text: str) -> Callable[[str], Any]:
    def parse(_: str) -> Any:
        raise ValueError(text)

    return parse


@dataclass(frozen=True)
class TopicSetting:
    """One topic-level setting. ``field`` None: described, but an override is refused."""

    name: str
    field: str | None
    broker_setting: str | None  # where the default comes from
    type: int
    parse: Callable[[str], Any]
    fixed: str = ""  # value described when not applied per topic and no broker setting
    refusal: str = ""  # why an override is refused


TOPIC_SETTINGS: dict[str, TopicSetting] = {
    s.name: s
    for s in [
        TopicSetting("cleanup.policy", "cleanup_policy", "log.cleanup.policy", LIST,
                     parse_cleanup_policy),
        TopicSetting("compression.type", None, None, STRING, _refused("not applied"),
                     fixed="producer",
                     refusal="batches are stored as the producer compressed them"),
        TopicSetting("delete.retention.ms", "delete_retention_ms",
                     "log.cleaner.delete.retention.ms", LONG, int_in(0)),
        TopicSetting("file.delete.delay.ms", "file_delete_delay_ms", "log.segment.delete.delay.ms",
                     LONG, int_in(0)),
        TopicSetting("flush.messages", None, "log.flush.interval.messages", LONG,
                     _refused("not applied"), fixed=str(LONG_MAX),
                     refusal="fsync policy is the broker-wide log.flush.interval.messages"),
        TopicSetting("flush.ms", None, "log.flush.interval.ms", LONG, _refused("not applied"),
                     fixed=str(LONG_MAX),
                     refusal="fsync policy is the broker-wide log.flush.interval.ms"),
        TopicSetting("index.interval.bytes", "index_interval_bytes", "log.index.interval.bytes",
                     INT, int_in(0, INT_MAX)),
        TopicSetting("max.message.bytes", "max_message_bytes", "message.max.bytes", INT,
                     int_in(0, INT_MAX)),
        TopicSetting("message.timestamp.type", "message_timestamp_type",
                     "log.message.timestamp.type", STRING, choice("CreateTime", "LogAppendTime")),
        TopicSetting("message.timestamp.after.max.ms", "message_timestamp_after_max_ms",
                     "log.message.timestamp.after.max.ms", LONG, int_in(0)),
        TopicSetting("message.timestamp.before.max.ms", "message_timestamp_before_max_ms",
                     "log.message.timestamp.before.max.ms", LONG, int_in(0)),
        TopicSetting("min.insync.replicas", None, None, INT, _refused("not applied"), fixed="1",
                     refusal="a single node has one replica; acks=all waits for it"),
        TopicSetting("retention.bytes", "retention_bytes", "log.retention.bytes", LONG,
                     int_in(-1)),
        TopicSetting("retention.ms", "retention_ms", "log.retention.ms", LONG, int_in(-1)),
        TopicSetting("segment.bytes", "segment_bytes", "log.segment.bytes", INT,
                     int_in(14, INT_MAX)),
        TopicSetting("segment.index.bytes", "index_max_bytes", "log.index.size.max.bytes", INT,
                     int_in(4096, INT_MAX)),
        TopicSetting("segment.ms", "roll_ms", "log.roll.ms", LONG, int_in(1)),
        TopicSetting("unclean.leader.election.enable", None, None, BOOLEAN,
                     _refused("not applied"), fixed="false",
                     refusal="a single node has no other replica to elect"),
    ]
}


def default_text(name: str) -> str:
    """The Kafka default of a topic setting as text (the broker setting's default too)."""
    setting = TOPIC_SETTINGS[name]
    assert setting.field is not None
    return format_setting(getattr(TopicConfig(), setting.field))
