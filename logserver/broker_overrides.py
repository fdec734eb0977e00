"""Dynamic broker configs: the broker defaults of topic settings, changed at run time.

Kafka lets AlterConfigs / IncrementalAlterConfigs change some broker settings without a
restart, either as the cluster-wide default (resource name "") or for one broker (its
node id); the per-broker value wins. Here the dynamic ones are the broker defaults of the
topic settings this server applies (``log.retention.ms``, ``log.segment.bytes``,
``message.max.bytes``, ...): a change re-resolves every topic without its own override at
once. The replication throttle rates (``leader.replication.throttled.rate``,
``follower.replication.throttled.rate``, cluster mode) are dynamic too; the fetch paths
read them at each use. Everything else in the config file is static (Kafka's answer: INVALID_REQUEST,
"Cannot update these configs dynamically").

Pure data here; the storage engines persist and apply (``Storage.alter_broker_overrides``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from logserver.topic_config import (
    LONG,
    TOPIC_SETTINGS,
    InvalidConfigError,
    TopicSetting,
    format_setting,
    int_in,
    setting_value,
)

__all__ = [
    "DYNAMIC_BROKER_CONFIG",
    "DYNAMIC_BROKER_SETTINGS",
    "DYNAMIC_DEFAULT_BROKER_CONFIG",
    "BrokerOverrides",
    "Overlay",
    "StaticBrokerConfigError",
    "validate_broker_overrides",
]

# DescribeConfigs ConfigSource values of dynamic broker configs.
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3

#: broker setting name -> the topic setting whose default it is, and the replication
#: throttle rates (logserver/cluster/throttle.py), which are broker settings only
DYNAMIC_BROKER_SETTINGS: dict[str, TopicSetting] = {
    **{s.broker_setting: s for s in TOPIC_SETTINGS.values()
       if s.field is not None and s.broker_setting is not None},
    **{name: TopicSetting(name, None, name, LONG, int_in(1))
       for name in ("leader.replication.throttled.rate", "follower.replication.throttled.rate")},
}


class StaticBrokerConfigError(InvalidConfigError):
    """A broker setting that cannot change at run time."""


def validate_broker_overrides(overrides: Mapping[str, str | None]) -> dict[str, str]:
    """Canonical text of dynamic broker settings; StaticBrokerConfigError for others,
    InvalidConfigError for bad values."""
    static = sorted(name for name in overrides if name not in DYNAMIC_BROKER_SETTINGS)
    if static:
        raise StaticBrokerConfigError(f"Cannot update these configs dynamically: {static}")
    canonical = {}
    for name, raw in overrides.items():
        if raw is None:
            raise InvalidConfigError(f"broker config {name!r} needs a value")
        try:
            canonical[name] = format_setting(DYNAMIC_BROKER_SETTINGS[name].parse(raw))
        except ValueError as exc:
            raise InvalidConfigError(f"invalid value {raw!r} for broker config {name!r}: {exc}") from None
    return canonical


@dataclass(frozen=True)
class BrokerOverrides:
    """The dynamic broker configs: cluster-wide defaults and this broker's own."""

    cluster_default: Mapping[str, str] = field(default_factory=dict)
    this_broker: Mapping[str, str] = field(default_factory=dict)

    def effective(self) -> dict[str, str]:
        return {**self.cluster_default, **self.this_broker}

    def source(self, name: str) -> int | None:
        """The ConfigSource of a dynamic value of ``name``, None when it has none."""
        if name in self.this_broker:
            return DYNAMIC_BROKER_CONFIG
        if name in self.cluster_default:
            return DYNAMIC_DEFAULT_BROKER_CONFIG
        return None

    def dynamic_values(self, name: str) -> list[tuple[str, int]]:
        """(value, ConfigSource) of ``name`` at each dynamic level, most specific first."""
        found = []
        if name in self.this_broker:
            found.append((self.this_broker[name], DYNAMIC_BROKER_CONFIG))
        if name in self.cluster_default:
            found.append((self.cluster_default[name], DYNAMIC_DEFAULT_BROKER_CONFIG))
        return found

    def by_setting(self) -> dict[str, list[tuple[str, int]]]:
        """``dynamic_values`` of every setting that has any (topic_config.describe's form)."""
        return {name: self.dynamic_values(name) for name in self.effective()}

    def as_json(self) -> dict[str, Any]:
        return {"default": dict(self.cluster_default), "broker": dict(self.this_broker)}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> BrokerOverrides:
        return cls(dict(doc.get("default", {})), dict(doc.get("broker", {})))


class Overlay(Mapping[str, Any]):
    """The broker's settings with the dynamic ones on top (what topic defaults come from)."""

    def __init__(self, base: Mapping[str, Any] | object | None, dynamic: Mapping[str, str]) -> None:
        self._base = base
        self._dynamic = dict(dynamic)

    def __getitem__(self, name: str) -> Any:
        if name in self._dynamic:
            return self._dynamic[name]
        value = setting_value(self._base, name)
        if value is None:
            raise KeyError(name)
        return value

    def __iter__(self) -> Iterator[str]:
        base = self._base if isinstance(self._base, Mapping) else {}
        return iter({**dict.fromkeys(base), **dict.fromkeys(self._dynamic)})

    def __len__(self) -> int:
        return sum(1 for _ in self)
