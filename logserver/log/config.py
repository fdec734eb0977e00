"""Log settings under Kafka's names, read once into a frozen object (no dict lookups per append)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["BROKER_SETTINGS", "TOPIC_SETTINGS", "LogConfig", "setting_value"]

_HOUR_MS = 3_600_000

# Broker setting name -> LogConfig field (Kafka's server.properties names).
BROKER_SETTINGS: dict[str, str] = {
    "log.segment.bytes": "segment_bytes",
    "log.roll.ms": "roll_ms",
    "log.index.size.max.bytes": "index_max_bytes",
    "log.index.interval.bytes": "index_interval_bytes",
    "log.retention.ms": "retention_ms",
    "log.retention.bytes": "retention_bytes",
    "producer.id.expiration.ms": "producer_id_expiration_ms",
    "log.segment.delete.delay.ms": "file_delete_delay_ms",
}
# Topic-level override name (CreateTopics / AlterConfigs) -> LogConfig field.
TOPIC_SETTINGS: dict[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "roll_ms",
    "segment.index.bytes": "index_max_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "file.delete.delay.ms": "file_delete_delay_ms",
}
# Coarser broker settings Kafka also accepts; the *.ms form wins when both are given.
_HOURS_FALLBACK = {"log.roll.hours": "roll_ms", "log.retention.hours": "retention_ms"}


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Per-partition log settings; defaults are Kafka's."""

    segment_bytes: int = 1 << 30
    roll_ms: int = 7 * 24 * _HOUR_MS
    index_max_bytes: int = 10 << 20
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * _HOUR_MS  # -1: keep forever
    retention_bytes: int = -1  # -1: no size limit
    producer_id_expiration_ms: int = 24 * _HOUR_MS
    file_delete_delay_ms: int = 60_000  # removed files linger this long as *.deleted

    def __post_init__(self) -> None:
        # Positions in the offset index are u32, and Kafka caps segments at 2 GiB too.
        if not 14 <= self.segment_bytes <= 2**31 - 1:
            raise ValueError(
                f"log.segment.bytes must be in [14, 2**31-1], got {self.segment_bytes}"
            )
        if self.roll_ms <= 0:
            raise ValueError(f"log.roll.ms must be positive, got {self.roll_ms}")
        if self.index_max_bytes < 12:
            raise ValueError(f"log.index.size.max.bytes must be >= 12, got {self.index_max_bytes}")
        if self.index_interval_bytes < 0:
            raise ValueError(
                f"log.index.interval.bytes must be >= 0, got {self.index_interval_bytes}"
            )

    @classmethod
    def from_settings(
        cls,
        broker: Mapping[str, Any] | object | None = None,
        topic: Mapping[str, Any] | None = None,
    ) -> LogConfig:
        """Build from broker settings (a mapping, an object with ``get``, or attributes
        named with underscores, e.g. ``log_segment_bytes``) and topic-level overrides."""
        values: dict[str, int] = {}
        if broker is not None:
            for name, fld in _HOURS_FALLBACK.items():
                raw = _lookup(broker, name)
                if raw is not None:
                    values[fld] = int(raw) * _HOUR_MS
            for name, fld in BROKER_SETTINGS.items():
                raw = _lookup(broker, name)
                if raw is not None:
                    values[fld] = int(raw)
        for name, raw in (topic or {}).items():
            fld = TOPIC_SETTINGS.get(name)
            if fld is not None and raw is not None:
                values[fld] = int(raw)
        return cls(**values)

    def with_overrides(self, topic: Mapping[str, Any] | None) -> LogConfig:
        """This config with topic-level overrides applied (unknown names are ignored)."""
        values = {
            TOPIC_SETTINGS[name]: int(raw)
            for name, raw in (topic or {}).items()
            if name in TOPIC_SETTINGS and raw is not None
        }
        return replace(self, **values) if values else self

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def setting_value(source: Mapping[str, Any] | object | None, name: str) -> Any:
    """One broker setting by Kafka name from any supported config shape, or None."""
    return None if source is None else _lookup(source, name)


def _lookup(source: Mapping[str, Any] | object, name: str) -> Any:
    if isinstance(source, Mapping):
        return source.get(name)
    getter = getattr(source, "get", None)
    if callable(getter):
        try:
            return getter(name)
        except (KeyError, TypeError):
            pass
    return getattr(source, name.replace(".", "_"), None)
