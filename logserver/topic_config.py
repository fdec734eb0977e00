"""One resolved topic configuration: broker defaults plus topic overrides, typed and frozen.

``TOPIC_SETTINGS`` is the only table of topic-level settings: Kafka's topic name, the
``TopicConfig`` field it sets, the broker setting its default comes from, how a value is
parsed, and the DescribeConfigs type. The broker's own ``log.*`` defaults are parsed with
the same parsers (logserver.config), the log reads ``TopicConfig`` attributes, CreateTopics
validates with ``validate_overrides`` and DescribeConfigs reports ``describe``.

Every topic setting Kafka defines is known. Those with a meaning here are applied; the
others are *inert*: validated, stored and reported by DescribeConfigs, but with no effect
(tiered storage, cleaner tuning, timestamp bounds...); the replication throttles' replica
lists are stored the same way and applied by the cluster (logserver/cluster/throttle.py).
Where an inert setting has values whose meaning this server cannot honour
(``remote.storage.enable=true``: no tiered storage) those values are refused with
INVALID_CONFIG. Every value DescribeConfigs reports is accepted back by AlterConfigs.
``compression.type`` (and the ``compression.*.level`` settings) are applied by
recompressing produced batches (logserver/recompress.py); ``flush.messages`` and
``flush.ms`` by the fsync policy (logserver/durability.py), their broker defaults being
``log.flush.interval.messages`` and ``log.flush.interval.ms``.
``min.insync.replicas`` is not a log setting but is applied: the produce
path reads it (``min_insync_replicas``) and it overrides the broker's
``min.insync.replicas`` for acks=all, as in Kafka; on a single node (one replica) a
value above 1 makes acks=all produce fail with NOT_ENOUGH_REPLICAS, as on a one-broker
Kafka. Topics stored with a refused override by an older version still load; the key is
ignored.
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
    "min_insync_replicas",
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
    # compression.type: "producer" keeps each batch as it came; a codec (or
    # "uncompressed") has batches in other codecs recompressed on produce
    # (logserver/recompress.py), with these levels.
    compression_type: str = "producer"
    compression_gzip_level: int = -1  # compression.gzip.level; -1: the codec's default
    compression_lz4_level: int = 9  # compression.lz4.level
    compression_zstd_level: int = 3  # compression.zstd.level
    # flush.messages / flush.ms: fsync after this many appended batches / this long after
    # the first unflushed append (logserver/durability.py); LONG_MAX: never by this rule.
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX

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
    """Stored override names that are dropped at load (unknown, refused, or a value this
    version refuses)."""
    return sorted(name for name, raw in overrides.items() if not _storable(name, raw))


def kept_overrides(overrides: Mapping[str, Any]) -> dict[str, str]:
    """The stored overrides that stay in force (applied or inert)."""
    return {name: str(raw) for name, raw in overrides.items() if _storable(name, raw)}


def _storable(name: str, raw: Any) -> bool:
    setting = TOPIC_SETTINGS.get(name)
    if setting is None or (setting.field is None and not setting.inert) or raw is None:
        return False
    try:
        setting.parse(str(raw))
    except ValueError:
        return False
    return True


def alterable(name: str) -> bool:
    """Whether CreateTopics / AlterConfigs accept an override of ``name``."""
    setting = TOPIC_SETTINGS.get(name)
    return setting is not None and (setting.field is not None or setting.inert)


def validate_overrides(overrides: Mapping[str, str | None]) -> dict[str, str]:
    """The overrides as they will be stored (canonical text), or InvalidConfigError."""
    canonical: dict[str, str] = {}
    for name, raw in overrides.items():
        setting = TOPIC_SETTINGS.get(name)
        if setting is None:
            raise InvalidConfigError(f"unknown topic config {name!r}")
        if setting.field is None and not setting.inert:
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


# broker setting -> its dynamic (value, ConfigSource) entries, most specific first
DynamicValues = Mapping[str, list[tuple[str, int]]]


def describe(config: TopicConfig, overrides: Mapping[str, str],
             broker: Mapping[str, Any], broker_sources: Iterable[str],
             dynamic: DynamicValues | None = None) -> list[tuple[str, str, int, int]]:
    """(name, value, ConfigSource, ConfigType) for every topic setting, as DescribeConfigs
    and CreateTopics report them: the value that really applies and where it came from
    (``config`` is resolved with the dynamic broker configs already)."""
    explicit = set(broker_sources)
    result = []
    for name, setting in TOPIC_SETTINGS.items():
        if setting.field is not None and name in overrides:
            result.append((name, format_setting(getattr(config, setting.field)),
                           DYNAMIC_TOPIC_CONFIG, setting.type))
            continue
        if setting.inert and name in overrides:
            result.append((name, overrides[name], DYNAMIC_TOPIC_CONFIG, setting.type))
            continue
        source = STATIC_BROKER_CONFIG if setting.broker_setting in explicit else DEFAULT_CONFIG
        levels = (dynamic or {}).get(setting.broker_setting or "", [])
        if levels and setting.field is not None:
            source = levels[0][1]
        if setting.field is not None:
            value = format_setting(getattr(config, setting.field))
        else:
            raw = setting_value(broker, setting.broker_setting) if setting.broker_setting else None
            value = setting.fixed if raw is None else format_setting(raw)
            if raw is None:
                source = DEFAULT_CONFIG
        result.append((name, value, source, setting.type))
    return result


def synonyms(name: str, overrides: Mapping[str, str], broker: Mapping[str, Any],
             broker_sources: Iterable[str], dynamic: DynamicValues | None = None
             ) -> list[tuple[str, str | None, int]]:
    """(name, value, ConfigSource) of every place a topic setting's value can come from,
    most specific first (DescribeConfigs with include_synonyms): the topic override, the
    dynamic broker configs, the broker setting from the config file, the default."""
    setting = TOPIC_SETTINGS[name]
    result: list[tuple[str, str | None, int]] = []
    if name in overrides:
        result.append((name, overrides[name], DYNAMIC_TOPIC_CONFIG))
    broker_name = setting.broker_setting or setting.synonym
    if setting.broker_setting is not None:
        result.extend((setting.broker_setting, value, source)
                      for value, source in (dynamic or {}).get(setting.broker_setting, []))
    if setting.broker_setting is not None:
        raw = setting_value(broker, setting.broker_setting)
        if setting.broker_setting in set(broker_sources) and raw is not None:
            result.append((setting.broker_setting, format_setting(raw), STATIC_BROKER_CONFIG))
    if broker_name is not None:
        default = (format_setting(getattr(TopicConfig(), setting.field))
                   if setting.field is not None else setting.fixed)
        result.append((broker_name, default, DEFAULT_CONFIG))
    return result


# -- parsers (shared with the broker's log.* settings in logserver.config) --------------------


def int_in(low: int, high: int = LONG_MAX) -> Callable[[str], int]:
    """A parser of integers in [low, high] whose errors say what was expected."""
    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise ValueError(f"expected an integer, got {text.strip()!r}") from None
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


def double_in(low: float, high: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        value = float(text.strip())
        if not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}, got {value}")
        return value

    return parse


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"must be true or false, got {text!r}")
    return value == "true"


def any_text(text: str) -> str:
    return text.strip()


def parse_throttled_replicas(text: str) -> str:
    """Kafka's format of the ``*.replication.throttled.replicas`` topic configs: empty,
    ``*``, or ``PARTITION:BROKER`` pairs separated by commas; ValueError otherwise."""
    value = text.strip()
    if value in ("", "*"):
        return value
    for pair in value.split(","):
        partition, sep, broker = pair.strip().partition(":")
        if not sep or not partition.strip().isdigit() or not broker.strip().isdigit():
            raise ValueError("must be '*' or a list of PARTITION:BROKER pairs, e.g. 0:1,1:2")
    return value


def only(allowed: str, why: str, parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """A valid value of ``parse``, but only ``allowed`` has a meaning this server honours."""

    def check(text: str) -> Any:
        value = parse(text)
        if format_setting(value) != allowed:
            raise ValueError(f"only {allowed} is supported: {why}")
        return value

    return check


def parse_cleanup_policy(text: str) -> str:
    """``delete``, ``compact`` or both, in the order given (as Kafka keeps a list value:
    an APPEND of ``compact`` to ``delete`` describes as ``delete,compact``)."""
    parts = list(dict.fromkeys(part.strip().lower() for part in text.split(",") if part.strip()))
    if not parts or not set(parts) <= {"delete", "compact"}:
        raise ValueError(f"must be delete, compact or compact,delete, got {text!r}")
    return ",".join(parts)


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


@dataclass(frozen=True)
class TopicSetting:
    """One topic-level setting. ``field`` None: not applied; ``inert`` ones are still
    stored and reported, the others described but an override is refused."""

    name: str
    field: str | None
    broker_setting: str | None  # where the default comes from
    type: int
    parse: Callable[[str], Any]
    fixed: str = ""  # value described when not applied per topic and no broker setting
    refusal: str = ""  # why an override is refused
    inert: bool = False  # accepted and stored, no effect here
    synonym: str | None = None  # Kafka's broker setting of the default (DescribeConfigs)


def _inert(name: str, type_: int, parse: Callable[[str], Any], default: str,
           synonym: str | None = None) -> TopicSetting:
    return TopicSetting(name, None, None, type_, parse, fixed=default, inert=True,
                        synonym=synonym)


TOPIC_SETTINGS: dict[str, TopicSetting] = {
    s.name: s
    for s in [
        TopicSetting("cleanup.policy", "cleanup_policy", "log.cleanup.policy", LIST,
                     parse_cleanup_policy),
        TopicSetting("compression.type", "compression_type", "compression.type", STRING,
                     choice("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
        TopicSetting("compression.gzip.level", "compression_gzip_level", "compression.gzip.level",
                     INT, int_in(-1, 9)),
        TopicSetting("compression.lz4.level", "compression_lz4_level", "compression.lz4.level",
                     INT, int_in(1, 17)),
        TopicSetting("compression.zstd.level", "compression_zstd_level", "compression.zstd.level",
                     INT, int_in(-131072, 22)),
        TopicSetting("delete.retention.ms", "delete_retention_ms",
                     "log.cleaner.delete.retention.ms", LONG, int_in(0)),
        TopicSetting("file.delete.delay.ms", "file_delete_delay_ms", "log.segment.delete.delay.ms",
                     LONG, int_in(0)),
        TopicSetting("flush.messages", "flush_messages", "log.flush.interval.messages", LONG,
                     int_in(1)),
        TopicSetting("flush.ms", "flush_ms", "log.flush.interval.ms", LONG, int_in(0)),
        _inert("follower.replication.throttled.replicas", LIST, parse_throttled_replicas, "",
               "follower.replication.throttled.replicas"),
        TopicSetting("index.interval.bytes", "index_interval_bytes", "log.index.interval.bytes",
                     INT, int_in(0, INT_MAX)),
        _inert("leader.replication.throttled.replicas", LIST, parse_throttled_replicas, "",
               "leader.replication.throttled.replicas"),
        _inert("local.retention.bytes", LONG, int_in(-2), "-2", "log.local.retention.bytes"),
        _inert("local.retention.ms", LONG, int_in(-2), "-2", "log.local.retention.ms"),
        _inert("max.compaction.lag.ms", LONG, int_in(1), str(LONG_MAX),
               "log.cleaner.max.compaction.lag.ms"),
        TopicSetting("max.message.bytes", "max_message_bytes", "message.max.bytes", INT,
                     int_in(0, INT_MAX)),
        _inert("message.downconversion.enable", BOOLEAN, parse_bool, "true",
               "log.message.downconversion.enable"),
        _inert("message.format.version", STRING, any_text, "3.0-IV1", "log.message.format.version"),
        TopicSetting("message.timestamp.after.max.ms", "message_timestamp_after_max_ms",
                     "log.message.timestamp.after.max.ms", LONG, int_in(0)),
        TopicSetting("message.timestamp.before.max.ms", "message_timestamp_before_max_ms",
                     "log.message.timestamp.before.max.ms", LONG, int_in(0)),
        _inert("message.timestamp.difference.max.ms", LONG, int_in(0), str(LONG_MAX),
               "log.message.timestamp.difference.max.ms"),
        TopicSetting("message.timestamp.type", "message_timestamp_type",
                     "log.message.timestamp.type", STRING, choice("CreateTime", "LogAppendTime")),
        _inert("min.cleanable.dirty.ratio", DOUBLE, double_in(0, 1), "0.5",
               "log.cleaner.min.cleanable.ratio"),
        _inert("min.compaction.lag.ms", LONG, int_in(0), "0", "log.cleaner.min.compaction.lag.ms"),
        # Read by the produce path, not by the log (``min_insync_replicas``); without an
        # override DescribeConfigs reports the broker's min.insync.replicas.
        TopicSetting("min.insync.replicas", None, "min.insync.replicas", INT,
                     int_in(1, INT_MAX), fixed="1", inert=True, synonym="min.insync.replicas"),
        _inert("preallocate", BOOLEAN, parse_bool, "false", "log.preallocate"),
        _inert("remote.log.copy.disable", BOOLEAN, parse_bool, "false"),
        _inert("remote.log.delete.on.disable", BOOLEAN, parse_bool, "false"),
        _inert("remote.storage.enable", BOOLEAN,
               only("false", "this server has no tiered storage", parse_bool), "false"),
        TopicSetting("retention.bytes", "retention_bytes", "log.retention.bytes", LONG,
                     int_in(-1)),
        TopicSetting("retention.ms", "retention_ms", "log.retention.ms", LONG, int_in(-1)),
        TopicSetting("segment.bytes", "segment_bytes", "log.segment.bytes", INT,
                     int_in(14, INT_MAX)),
        TopicSetting("segment.index.bytes", "index_max_bytes", "log.index.size.max.bytes", INT,
                     int_in(4096, INT_MAX)),
        _inert("segment.jitter.ms", LONG, int_in(0), "0", "log.roll.jitter.ms"),
        TopicSetting("segment.ms", "roll_ms", "log.roll.ms", LONG, int_in(1)),
        _inert("unclean.leader.election.enable", BOOLEAN, parse_bool, "false",
               "unclean.leader.election.enable"),
    ]
}


def min_insync_replicas(overrides: Mapping[str, Any] | None, broker_default: int) -> int:
    """The ISR size acks=all needs: the topic's ``min.insync.replicas`` override, else the
    broker's (Kafka's rule). An unparsable stored value falls back to the broker's."""
    raw = None if overrides is None else overrides.get("min.insync.replicas")
    if raw is None:
        return broker_default
    try:
        return max(1, int(str(raw)))
    except ValueError:
        return broker_default


def default_text(name: str) -> str:
    """The Kafka default of a topic setting as text (the broker setting's default too)."""
    setting = TOPIC_SETTINGS[name]
    assert setting.field is not None
    return format_setting(getattr(TopicConfig(), setting.field))
