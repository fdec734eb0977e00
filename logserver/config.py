"""Server settings under Kafka's names, from flags, environment and a properties file.

Precedence: command-line flags > environment (``LOGSERVER_LOG_DIRS`` for ``log.dirs``)
> config file > defaults. An unknown flag or file setting, or an invalid value anywhere,
stops start-up with a message that names the setting, because a typo silently ignored is
a production incident later. The environment is shared with everything else in the
process's world, so there an unknown ``LOGSERVER_*`` name is only warned about (once,
naming it), and the service links Kubernetes injects for a Service named ``logserver``
(``LOGSERVER_PORT=tcp://...``, ``LOGSERVER_SERVICE_HOST``...) are ignored quietly.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
import socket
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from logserver.kafka_settings import ALIASES, IGNORED, drop_ignored, resolve_aliases
from logserver.topic_config import TOPIC_SETTINGS, default_text

log = logging.getLogger(__name__)

ENV_PREFIX = "LOGSERVER_"
# Environment variables of ours that choose how the process runs, not broker settings.
PROCESS_ENV_VARS = frozenset({"LOGSERVER_EVENT_LOOP"})
# Docker links and Kubernetes service links for a Service named "logserver":
# LOGSERVER_PORT=tcp://10.0.0.7:9092, LOGSERVER_PORT_9092_TCP_ADDR=..., LOGSERVER_SERVICE_HOST=...
SERVICE_LINK_ENV = re.compile(
    r"LOGSERVER_(SERVICE_HOST|SERVICE_PORT(_\w+)?|PORT(_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?)")
LONG_MAX = 2**63 - 1
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})


class ConfigError(ValueError):
    """A setting is unknown or its value is invalid; the message names it."""


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def parse_listeners(text: str) -> list[Listener]:
    listeners = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        parts = urlsplit(item)
        if not parts.scheme or parts.port is None:
            raise ValueError(f"expected NAME://host:port, got {item!r}")
        host = parts.hostname or ""
        listeners.append(Listener(parts.scheme.upper(), host, parts.port))
    if not listeners:
        raise ValueError("at least one listener is required")
    return listeners


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "yes", "1", "on"):
        return True
    if lowered in ("false", "no", "0", "off"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def _int_in(low: int, high: int = LONG_MAX) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text.strip())
        if not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}, got {value}")
        return value

    return parse


def _optional_int_in(low: int) -> Callable[[str], int | None]:
    parse_int = _int_in(low)

    def parse(text: str) -> int | None:
        if text.strip().lower() in ("", "none", "null"):
            return None
        return parse_int(text)

    return parse


@dataclass(frozen=True)
class Setting:
    name: str
    default: str | None
    parse: Callable[[str], Any]
    doc: str


def _topic_default(name: str, topic_setting: str, doc: str) -> Setting:
    """A broker default of a topic setting: default and parser come from its one table."""
    setting = TOPIC_SETTINGS[topic_setting]
    assert setting.broker_setting == name
    return Setting(name, default_text(topic_setting), setting.parse, doc)


SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in [
        Setting("listeners", "PLAINTEXT://127.0.0.1:9092", parse_listeners,
                "Addresses to listen on, NAME://host:port, comma separated."),
        Setting("advertised.listeners", None, parse_listeners,
                "Addresses given to clients in Metadata; defaults to listeners."),
        Setting("node.id", "1", _int_in(0, 2**31 - 1), "This broker's id."),
        Setting("log.dirs", "./data", str, "Data directory (one directory)."),
        Setting("num.partitions", "1", _int_in(1, 100_000),
                "Partitions of auto-created topics and of CreateTopics with -1."),
        Setting("auto.create.topics.enable", "true", _parse_bool,
                "Create unknown topics when a client's Metadata request allows it."),
        Setting("delete.topic.enable", "true", _parse_bool, "Allow DeleteTopics."),
        _topic_default("log.segment.bytes", "segment.bytes",
                "Roll a new segment when the active one reaches this size."),
        _topic_default("log.roll.ms", "segment.ms",
                "Roll a new segment when the active one is this old."),
        _topic_default("log.index.size.max.bytes", "segment.index.bytes",
                "Maximum size of an offset or time index; a full index rolls the segment."),
        _topic_default("log.index.interval.bytes", "index.interval.bytes",
                "Bytes of log between two index entries."),
        Setting("log.flush.interval.messages", str(LONG_MAX), _int_in(1),
                "fsync after this many appended batches; 1 means fsync every append "
                "before it is acknowledged."),
        Setting("log.flush.interval.ms", None, _optional_int_in(1),
                "fsync every this many milliseconds; unset means no timed fsync."),
        _topic_default("log.message.timestamp.type", "message.timestamp.type",
                "Keep the producer's timestamps or stamp the broker's time."),
        _topic_default("message.max.bytes", "max.message.bytes",
                "Largest record batch accepted from a producer."),
        Setting("socket.request.max.bytes", "104857600", _int_in(1, 2**31 - 1),
                "Largest request frame; larger ones close the connection unread."),
        Setting("queued.max.requests", "500", _int_in(1, 100_000),
                "Requests read ahead per connection before reading pauses."),
        # -- consumer groups (logserver/groups) ---------------------------------------
        Setting("group.min.session.timeout.ms", "6000", _int_in(1, 2**31 - 1),
                "Smallest session timeout a group member may ask for (else INVALID_SESSION_TIMEOUT)."),
        Setting("group.max.session.timeout.ms", "1800000", _int_in(1, 2**31 - 1),
                "Largest session timeout a group member may ask for (else INVALID_SESSION_TIMEOUT)."),
        Setting("group.initial.rebalance.delay.ms", "3000", _int_in(0, 2**31 - 1),
                "How long the first rebalance of an empty group waits for more members to join."),
        Setting("group.max.size", str(2**31 - 1), _int_in(1, 2**31 - 1),
                "Most members one group may have (else GROUP_MAX_SIZE_REACHED)."),
        Setting("offsets.topic.num.partitions", "1", _int_in(1, 1000),
                "Partitions of the internal __consumer_offsets topic when it is created "
                "(Kafka: 50, for spreading coordinators over brokers; one node gains nothing)."),
        Setting("offsets.topic.segment.bytes", "104857600", _int_in(14, 2**31 - 1),
                "Segment size of the internal __consumer_offsets topic."),
        Setting("offsets.retention.minutes", "10080", _int_in(1, 2**31 - 1),
                "Committed offsets of a group that has been empty this long are deleted."),
        Setting("offsets.retention.check.interval.ms", "600000", _int_in(1),
                "How often expired committed offsets are looked for."),
        Setting("offset.metadata.max.bytes", "4096", _int_in(0, 2**31 - 1),
                "Longest metadata string of a committed offset (else OFFSET_METADATA_TOO_LARGE)."),
        # -- reliability: recovery, limits, retention (issue 4) ---------------------------
        Setting("log.recovery.allow.data.loss", "false", _parse_bool,
                "Let start-up recovery truncate damage that is not a torn tail (a corrupt batch "
                "with valid data after it); false refuses to start (exit code 3) and says where."),
        Setting("max.connections", str(2**31 - 1), _int_in(1, 2**31 - 1),
                "Most client connections open at once; more are closed on accept."),
        Setting("max.connections.per.ip", str(2**31 - 1), _int_in(1, 2**31 - 1),
                "Most client connections open at once from one IP address."),
        Setting("max.connection.creation.rate", str(2**31 - 1), _int_in(1, 2**31 - 1),
                "Most new connections accepted per second (token bucket, burst = rate); "
                "connections beyond it are closed on accept."),
        Setting("connections.max.idle.ms", "600000", _int_in(1),
                "Close a connection after this long with no request and nothing in flight."),
        Setting("max.topics", "10000", _int_in(1, 2**31 - 1),
                "Most topics this broker holds (CreateTopics/auto-create beyond it: "
                "POLICY_VIOLATION / not created)."),
        Setting("max.partitions", "100000", _int_in(1, 2**31 - 1),
                "Most partitions over all topics (beyond it: POLICY_VIOLATION)."),
        _topic_default("log.retention.ms", "retention.ms",
                "Delete closed segments whose newest record is older than this; -1 keeps forever."),
        _topic_default("log.retention.bytes", "retention.bytes",
                "Delete the oldest closed segments while a partition is larger than this; -1: no limit."),
        Setting("log.retention.check.interval.ms", "300000", _int_in(1),
                "How often retention and compaction run."),
        Setting("log.segment.delete.hook", None, str,
                "Command run after retention deletes segments, with the deleted .log paths as "
                "arguments (split like a shell would; no shell is involved)."),
        _topic_default("log.cleanup.policy", "cleanup.policy",
                "delete: retention by time/size; compact: keep the latest record per key."),
        _topic_default("log.cleaner.delete.retention.ms", "delete.retention.ms",
                "How long compaction keeps tombstones (null-value records) before removing them."),
        Setting("log.cleaner.dedupe.buffer.size", "134217728", _int_in(1 << 10),
                "Memory for compaction's key map; a log with more keys is compacted in "
                "several passes."),
        _topic_default("log.segment.delete.delay.ms", "file.delete.delay.ms",
                       "How long deleted segments and partitions stay on disk (renamed "
                       "*.deleted / *-delete) before their files are removed."),
        # -- cluster mode (logserver/cluster; off unless cluster.etcd.endpoints is set) --
        Setting("cluster.etcd.endpoints", None, str,
                "etcd client addresses, host:port comma separated; set, the broker joins a "
                "cluster (node.id must be unique); unset, it runs alone with no etcd."),
        Setting("cluster.etcd.prefix", "/logserver", str,
                "Key prefix of this cluster's state in etcd (several clusters may share one etcd)."),
        Setting("broker.rack", None, str, "This broker's rack; replicas are spread over racks."),
        Setting("broker.session.timeout.ms", "9000", _int_in(2000, 2**31 - 1),
                "TTL of the broker's etcd lease: a broker silent this long is dead and loses "
                "its leaderships."),
        Setting("default.replication.factor", "1", _int_in(1, 32767),
                "Replicas of auto-created topics and of CreateTopics with -1 (cluster mode)."),
        Setting("min.insync.replicas", "1", _int_in(1, 32767),
                "acks=all produce needs at least this many in-sync replicas, else "
                "NOT_ENOUGH_REPLICAS (cluster mode)."),
        Setting("replica.lag.time.max.ms", "30000", _int_in(1),
                "A follower not caught up for this long leaves the ISR (cluster mode)."),
        Setting("unclean.leader.election.enable", "false", _parse_bool,
                "Let a replica outside the ISR become leader when no ISR member is alive "
                "(loses acknowledged records; cluster mode)."),
    ]
}


class Config(Mapping[str, Any]):
    """Parsed settings; access with Kafka's names, e.g. ``config["log.dirs"]``."""

    def __init__(self, values: Mapping[str, Any], sources: Mapping[str, str]) -> None:
        self._values = dict(values)
        self.sources = dict(sources)

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    @property
    def data_dir(self) -> Path:
        return Path(self["log.dirs"].split(",")[0]).expanduser()

    @property
    def advertised(self) -> list[Listener]:
        return self["advertised.listeners"] or self["listeners"]

    def with_bound_ports(self, ports: Iterable[int]) -> Config:
        """Fill in the real port of listeners given as port 0, for advertising."""
        bound = [Listener(li.name, li.host, port) for li, port in zip(self["listeners"], ports, strict=True)]
        values = dict(self._values, listeners=bound)
        if self._values["advertised.listeners"] is None:
            # As Kafka: a listener on every interface is advertised under the host's name.
            values["advertised.listeners"] = [
                Listener(li.name, socket.getfqdn(), li.port) if li.host in WILDCARD_HOSTS else li
                for li in bound]
        return Config(values, self.sources)


def read_properties(path: Path) -> dict[str, str]:
    """Java .properties subset: key=value or key: value, # and ! comments."""
    result: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"config file {path}: {exc.strerror}") from exc
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
        if sep < 0:
            raise ConfigError(f"config file {path} line {number}: expected key=value, got {raw!r}")
        result[line[:sep].strip()] = line[sep + 1:].strip()
    return result


def env_name(setting: str) -> str:
    return ENV_PREFIX + setting.upper().replace(".", "_")


def load_config(
    flags: Mapping[str, str] | None = None,
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    raw: dict[str, str] = {}
    sources: dict[str, str] = {}
    warned: set[str] = set()
    layers: list[tuple[dict[str, str], str, str]] = []  # (settings, where, unknown message)
    controller_names: set[str] = set()
    if config_file is not None:
        where = f"config file {config_file}"
        layers.append((read_properties(config_file), where, f"unknown setting {{!r}} in {where}"))
    env = os.environ if environ is None else environ
    by_env = {env_name(name): name for name in (*SETTINGS, *ALIASES, *IGNORED)}
    from_env: dict[str, str] = {}
    for key, value in sorted(env.items()):
        if not key.startswith(ENV_PREFIX) or key in PROCESS_ENV_VARS:
            continue
        if key in by_env:
            from_env[by_env[key]] = value
        elif SERVICE_LINK_ENV.fullmatch(key):
            log.debug("ignoring %s: a Docker/Kubernetes service link, not a setting", key)
        else:
            _warn_unknown_env(key, by_env)
    layers.append((from_env, "environment", "unknown setting {!r} in the environment"))
    layers.append((dict(flags or {}), "command line", "unknown setting {!r}"))
    for layer, where, unknown in layers:
        controller_names.update(_names(layer.get("controller.listener.names", "")))
        layer = resolve_aliases(drop_ignored(layer, where, warned), where, ConfigError)
        for key, value in layer.items():
            if key not in SETTINGS:
                raise ConfigError(unknown.format(key))
            source = f"environment {env_name(key)}" if where == "environment" else where
            raw[key], sources[key] = value, source
    values: dict[str, Any] = {}
    for name, setting in SETTINGS.items():
        text = raw.get(name, setting.default)
        if text is None:
            values[name] = None
            continue
        try:
            values[name] = setting.parse(text)
        except ValueError as exc:
            where = sources.get(name, "default")
            raise ConfigError(f"invalid value for setting {name!r} ({where}): {exc}") from exc
    for name in ("listeners", "advertised.listeners"):
        if values[name] and controller_names:
            values[name] = _without_controllers(values[name], controller_names, name)
    return Config(values, sources)


def _names(text: str) -> list[str]:
    return [part.strip().upper() for part in text.split(",") if part.strip()]


def _without_controllers(listeners: list[Listener], controllers: set[str],
                         setting: str) -> list[Listener]:
    """KRaft's controller listeners: not opened, there is no quorum to serve."""
    kept = [li for li in listeners if li.name not in controllers]
    for li in listeners:
        if li.name in controllers:
            log.warning("not opening %s listener %s: it is a KRaft controller listener "
                        "(controller.listener.names)", setting, li)
    if not kept:
        raise ConfigError(f"invalid value for setting {setting!r}: every listener is a "
                          f"controller listener ({', '.join(sorted(controllers))})")
    return kept


def _warn_unknown_env(key: str, by_env: Mapping[str, str]) -> None:
    close = difflib.get_close_matches(key, by_env, n=1)
    hint = f" (did you mean {close[0]}, for {by_env[close[0]]}?)" if close else ""
    log.warning("ignoring environment variable %s: no setting is named %s%s", key,
                key[len(ENV_PREFIX):].lower().replace("_", "."), hint)
