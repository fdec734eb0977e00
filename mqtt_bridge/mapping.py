"""Mapping rules between MQTT topics and Kafka topics (uplink and downlink).

Uplink rule ``devices/{device_id}/{stream} -> {stream} key {device_id}``: a PUBLISH
whose topic matches the pattern level by level goes to the Kafka topic and key built
from the captured names. Downlink rule ``commands -> devices/{key}/commands``: a record
of the Kafka topic becomes a PUBLISH on the MQTT topic built from its key.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

_PLACEHOLDER = re.compile(r"^\{([A-Za-z_][A-Za-z0-9_]*)\}$")
_KAFKA_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


class RuleError(ValueError):
    """A mapping rule that cannot be parsed."""


def valid_kafka_topic(name: str) -> bool:
    return bool(_KAFKA_TOPIC.match(name)) and name not in (".", "..")


def _render(template: str, values: dict[str, str]) -> str:
    try:
        return template.format_map(values)
    except (KeyError, IndexError, ValueError) as exc:
        raise RuleError(f"template {template!r}: {exc}") from exc


@dataclass(frozen=True)
class UplinkRule:
    """MQTT topic pattern -> Kafka topic template and key template."""

    pattern: str
    topic: str
    key: str | None

    def __post_init__(self) -> None:
        names = []
        for level in self.pattern.split("/"):
            m = _PLACEHOLDER.match(level)
            if m:
                names.append(m.group(1))
            elif "{" in level or "}" in level or "+" in level or "#" in level:
                raise RuleError(f"uplink pattern level {level!r}: use whole-level {{name}}")
        for tmpl in (self.topic, self.key or ""):
            for used in re.findall(r"\{([^}]*)\}", tmpl):
                if used not in names:
                    raise RuleError(f"template uses {{{used}}} which {self.pattern!r} does not capture")
        object.__setattr__(self, "_levels", self.pattern.split("/"))

    def match(self, mqtt_topic: str) -> tuple[str, bytes | None] | None:
        """(Kafka topic, key) for a matching MQTT topic, else None."""
        levels = mqtt_topic.split("/")
        pattern: list[str] = self._levels  # type: ignore[attr-defined]  # set in __post_init__ of this frozen slots-less dataclass
        if len(levels) != len(pattern):
            return None
        values: dict[str, str] = {}
        for want, got in zip(pattern, levels, strict=True):
            if want.startswith("{"):
                if not got:
                    return None
                values[want[1:-1]] = got
            elif want != got:
                return None
        topic = self.topic.format_map(values)
        key = self.key.format_map(values).encode() if self.key is not None else None
        return topic, key

    @property
    def mqtt_filter(self) -> str:
        return "/".join("+" if lv.startswith("{") else lv for lv in self.pattern.split("/"))

    @classmethod
    def parse(cls, text: str) -> UplinkRule:
        """``PATTERN=TOPIC[,key=KEY]``, e.g. ``devices/{device_id}/{stream}={stream},key={device_id}``."""
        pattern, sep, rest = text.partition("=")
        if not sep or not pattern or not rest:
            raise RuleError(f"uplink rule {text!r}: expected PATTERN=TOPIC[,key=KEY]")
        parts = rest.split(",")
        topic, key = parts[0], None
        for extra in parts[1:]:
            name, _, value = extra.partition("=")
            if name.strip() != "key":
                raise RuleError(f"uplink rule {text!r}: unknown option {name!r}")
            key = value.strip()
        return cls(pattern.strip(), topic.strip(), key)


@dataclass(frozen=True)
class DownlinkRule:
    """Kafka topic -> MQTT topic template (``{key}`` is the record key), delivery QoS cap."""

    kafka_topic: str
    mqtt_topic: str
    qos: int = 1
    retain: bool = False

    def __post_init__(self) -> None:
        if not valid_kafka_topic(self.kafka_topic):
            raise RuleError(f"downlink rule: {self.kafka_topic!r} is not a valid Kafka topic")
        for used in re.findall(r"\{([^}]*)\}", self.mqtt_topic):
            if used != "key":
                raise RuleError(f"downlink template {self.mqtt_topic!r}: only {{key}} is known")
        if self.qos not in (0, 1, 2):
            raise RuleError("downlink QoS must be 0, 1 or 2")

    @property
    def keyed(self) -> bool:
        return "{key}" in self.mqtt_topic

    @property
    def mqtt_filter(self) -> str:
        """The topics this rule can produce, as an MQTT filter (``{key}`` -> ``+``)."""
        return "/".join("+" if "{key}" in lv else lv for lv in self.mqtt_topic.split("/"))

    def topic_for(self, key: bytes | None) -> str | None:
        if not self.keyed:
            return self.mqtt_topic
        if not key:
            return None
        try:
            k = key.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if "/" in k or "+" in k or "#" in k or "\x00" in k:
            return None
        return self.mqtt_topic.replace("{key}", k)

    @classmethod
    def parse(cls, text: str) -> DownlinkRule:
        """``KAFKA_TOPIC=MQTT_TEMPLATE[,qos=N][,retain]``, e.g. ``commands=devices/{key}/commands``."""
        topic, sep, rest = text.partition("=")
        if not sep or not topic or not rest:
            raise RuleError(f"downlink rule {text!r}: expected KAFKA_TOPIC=MQTT_TOPIC[,qos=N]")
        parts = rest.split(",")
        qos, retain = 1, False
        for extra in parts[1:]:
            name, _, value = extra.partition("=")
            name = name.strip()
            if name == "qos":
                qos = int(value)
            elif name == "retain":
                retain = value.strip().lower() not in ("0", "false", "no")
            else:
                raise RuleError(f"downlink rule {text!r}: unknown option {name!r}")
        return cls(topic.strip(), parts[0].strip(), qos, retain)


ROUTE_CACHE_SIZE = 100_000  # distinct MQTT topics remembered; cleared when full

DEFAULT_UPLINK = ["devices/{device_id}/{stream}={stream},key={device_id}"]
DEFAULT_DOWNLINK = ["commands=devices/{key}/commands", "ota=ota"]
#: Kafka topics the default uplink rule may write: the streams devices are expected to use.
DEFAULT_UPLINK_TOPICS = ["telemetry", "events"]


class Mapping:
    """All rules; the first uplink rule that matches wins."""

    def __init__(self, uplink: list[UplinkRule], downlink: list[DownlinkRule]) -> None:
        self.uplink = uplink
        self.downlink = downlink
        self.by_kafka_topic = {r.kafka_topic: r for r in downlink}
        self._routes: dict[str, tuple[str, bytes | None] | None] = {}
        if len(self.by_kafka_topic) != len(downlink):
            raise RuleError("two downlink rules for one Kafka topic")

    @classmethod
    def parse(cls, uplink: list[str], downlink: list[str]) -> Mapping:
        return cls([UplinkRule.parse(u) for u in uplink], [DownlinkRule.parse(d) for d in downlink])

    def route_up(self, mqtt_topic: str) -> tuple[str, bytes | None] | None:
        # Every device publishes to the same few topics again and again: matching the
        # rules once per topic, not once per message, was 15% of the bridge's CPU.
        try:
            return self._routes[mqtt_topic]
        except KeyError:
            pass
        got = None
        for rule in self.uplink:
            got = rule.match(mqtt_topic)
            if got is not None:
                break
        if len(self._routes) >= ROUTE_CACHE_SIZE:
            self._routes.clear()
        self._routes[mqtt_topic] = got
        return got


class UplinkTopics:
    """Which Kafka topics the uplink may write: the configured list (``*`` globs), never a
    downlink topic (commands come from the log), an internal (``__``) or the session topic.

    Every new name a device invents would otherwise become a Kafka topic with its files.
    """

    def __init__(self, allowed: list[str], forbidden: set[str]) -> None:
        self.allowed = list(allowed)
        self.forbidden = frozenset(forbidden)
        self._verdicts: dict[str, bool] = {}

    def permits(self, kafka_topic: str) -> bool:
        try:
            return self._verdicts[kafka_topic]
        except KeyError:
            pass
        ok = (
            kafka_topic not in self.forbidden
            and not kafka_topic.startswith("__")
            and any(fnmatch.fnmatchcase(kafka_topic, p) for p in self.allowed)
        )
        if len(self._verdicts) >= ROUTE_CACHE_SIZE:
            self._verdicts.clear()
        self._verdicts[kafka_topic] = ok
        return ok
