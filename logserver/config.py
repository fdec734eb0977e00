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
from logserver.security.settings import (
    DEFAULT_PROTOCOL_MAP,
    JAAS_IGNORED,
    is_jaas_setting,
    normalize_protocol_map,
    parse_authorizer_class,
    parse_client_auth,
    parse_mechanisms,
    parse_store_type,
    parse_tls_versions,
    per_listener_setting,
)
from logserver.topic_config import TOPIC_SETTINGS, default_text, int_in

log = logging.getLogger(__name__)

ENV_PREFIX = "LOGSERVER_"
# Environment variables of ours that choose how the process runs, not broker settings
# (LOGSERVER_BOOTSTRAP_SERVER: the admin commands' default server, logserver/admin_cli).
PROCESS_ENV_VARS = frozenset({"LOGSERVER_EVENT_LOOP", "LOGSERVER_BOOTSTRAP_SERVER"})
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
        # The name may hold underscores (SASL_SSL), which URL schemes may not: split it off.
        name, sep, rest = item.partition("://")
        try:
            parts = urlsplit(f"tcp://{rest}")
            port = parts.port
        except ValueError:
            port = None
        if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name) or port is None:
            raise ValueError(f"expected NAME://host:port, got {item!r}")
        host = parts.hostname or ""
        listeners.append(Listener(name.upper(), host, port))
    if not listeners:
        raise ValueError("at least one listener is required")
    return listeners


def parse_admin_listeners(text: str) -> list[Listener]:
    """``http://host:port`` list for the admin HTTP API; empty turns it off."""
    if not text.strip():
        return []
    listeners = parse_listeners(text)
    for listener in listeners:
        if listener.name != "HTTP":
            raise ValueError(f"the admin API speaks plain HTTP: expected http://host:port, "
                             f"got {listener}")
    return listeners


def parse_rest_listeners(text: str) -> list[Listener]:
    """``http://`` or ``https://host:port`` list for the REST Proxy; empty turns it off.
    An https listener uses the Kafka listeners' ``ssl.*`` settings."""
    if not text.strip():
        return []
    listeners = parse_listeners(text)
    for listener in listeners:
        if listener.name not in ("HTTP", "HTTPS"):
            raise ValueError(f"expected http://host:port or https://host:port, got {listener}")
    return listeners


def _optional_http_url(text: str) -> str | None:
    """``http://host:port`` (an admin API to read), or empty for none."""
    text = text.strip()
    if not text:
        return None
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or not parts.hostname or port is None:
        raise ValueError(f"expected http://host:port, got {text!r}")
    return text.rstrip("/")


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "yes", "1", "on"):
        return True
    if lowered in ("false", "no", "0", "off"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


_int_in = int_in  # one integer parser for broker and topic settings


def _optional_int_in(low: int) -> Callable[[str], int | None]:
    parse_int = _int_in(low)

    def parse(text: str) -> int | None:
        if text.strip().lower() in ("", "none", "null"):
            return None
        return parse_int(text)

    return parse


def _data_dir(text: str) -> str:
    path = Path(text.split(",")[0].strip()).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError(f"{str(path)!r} is a file, not a directory")
    return text


def _name_list(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _assignor_list(text: str) -> list[str]:
    """Comma-separated server-side assignor names, each one we implement."""
    aliases = {"UniformAssignor": "uniform", "RangeAssignor": "range"}  # Kafka's class names
    names = [aliases.get(n.strip().rsplit(".", 1)[-1], n.strip())
             for n in text.split(",") if n.strip()]
    known = ("uniform", "range")
    if not names or any(n not in known for n in names):
        raise ValueError(f"expected a list of {', '.join(known)}, got {text!r}")
    return names


def _budget_bytes(text: str) -> int | None:
    """A positive byte count, or -1 for no limit (Kafka's convention)."""
    value = int(text.strip())
    if value == -1:
        return None
    if value < 1:
        raise ValueError(f"must be -1 (no limit) or positive, got {value}")
    return value


@dataclass(frozen=True)
class Setting:
    name: str
    default: str | None
    parse: Callable[[str], Any]
    doc: str
    sensitive: bool = False  # a password or key: never shown (DescribeConfigs gives null)


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
        Setting("admin.listeners", "http://127.0.0.1:9644", parse_admin_listeners,
                "Admin HTTP API and Prometheus /metrics (http://host:port, comma separated; "
                "empty: off). 9644 is Redpanda's admin port."),
        Setting("rest.proxy.listeners", "http://127.0.0.1:8082", parse_rest_listeners,
                "Confluent REST Proxy v2 API (http://host:port or https://host:port, comma "
                "separated; empty: off; https uses the ssl.* settings of the Kafka "
                "listeners). 8082 is Confluent's and Redpanda's port; see docs/rest-proxy.md."),
        Setting("consumer.instance.timeout.ms", "300000", _int_in(1000, 2**31 - 1),
                "REST Proxy consumer instances idle longer than this are deleted "
                "(Confluent's default, 5 minutes)."),
        Setting("admin.allowed.hosts", "", _name_list,
                "Host names the admin HTTP API answers to besides IP addresses, localhost, "
                "this machine's names and the admin listeners' hosts (comma separated; *: "
                "any). A request for another name gets 403: a web page cannot reach the API "
                "through a DNS name of its own pointed at this address (DNS rebinding)."),
        Setting("admin.require.auth", "false", _parse_bool,
                "Every admin HTTP API request but liveness and readiness needs HTTP basic "
                "credentials of a SCRAM user (logserver scram add); 401 otherwise. Redpanda's "
                "admin_api_require_auth. Use it with TLS in front, or on loopback only."),
        Setting("admin.mqtt.bridge.url", None, _optional_http_url,
                "Admin API (mqtt-bridge --admin-listen) of an MQTT bridge run on its own, "
                "whose connected devices the dashboard shows (--mqtt-bridge sets its "
                "child's itself)."),
        Setting("node.id", "1", _int_in(0, 2**31 - 1), "This broker's id."),
        Setting("log.dirs", "./data", _data_dir, "Data directory (one directory)."),
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
        _topic_default("log.flush.interval.messages", "flush.messages",
                "fsync a partition after this many appended batches; 1 means fsync every "
                "append before it is acknowledged (topic override: flush.messages)."),
        Setting("log.flush.interval.ms", None, _optional_int_in(0),
                "fsync a partition at most this many milliseconds after its first "
                "unflushed append; unset means no timed fsync (topic override: flush.ms)."),
        _topic_default("compression.type", "compression.type",
                "Codec of the batches stored: producer keeps each batch as it came; "
                "gzip, snappy, lz4, zstd or uncompressed recompresses batches that arrive "
                "in another codec (off the event loop)."),
        _topic_default("compression.gzip.level", "compression.gzip.level",
                "gzip level of batches the broker recompresses (-1: the codec's default)."),
        _topic_default("compression.lz4.level", "compression.lz4.level",
                "lz4 level of batches the broker recompresses."),
        _topic_default("compression.zstd.level", "compression.zstd.level",
                "zstd level of batches the broker recompresses."),
        Setting("log.file.handles.max", "10000", _int_in(0),
                "Most descriptors the segment files of all partitions hold at once "
                "(a file-handle cache, as Redpanda's): beyond it the least recently used "
                "segments close their files and reopen them when next read or written, so "
                "descriptors no longer grow with the partition count. At start-up it is "
                "lowered to what the descriptor limit (ulimit -n) leaves beside a reserve "
                "for connections; 0: no bound."),
        Setting("log.writer.thread.min.bytes", "-1", _int_in(-1),
                "Produce batches at least this large are written by a writer thread, off "
                "the event loop (offsets are assigned at once, in order; fetchers see a "
                "batch once written); -1 (default) writes every batch on the event loop. "
                "262144 cut other clients' p99 latency 9-30x beside 1 MB batches but "
                "measured 0.72-1.01x their throughput."),
        Setting("produce.validation.thread.min.bytes", "65536", _int_in(-1),
                "zstd-compressed produce batches at least this large are validated "
                "(inflated and walked) on a pool thread instead of the event loop, appends "
                "staying in arrival order per partition; -1 validates every batch on the loop."),
        _topic_default("log.message.timestamp.type", "message.timestamp.type",
                "Keep the producer's timestamps or stamp the broker's time."),
        _topic_default("log.message.timestamp.after.max.ms", "message.timestamp.after.max.ms",
                "CreateTime topics: a batch whose largest timestamp is more than this ahead "
                "of the broker's clock gets INVALID_TIMESTAMP (KIP-937; Kafka 4's default)."),
        _topic_default("log.message.timestamp.before.max.ms", "message.timestamp.before.max.ms",
                "CreateTime topics: a batch whose first timestamp is more than this behind "
                "the broker's clock gets INVALID_TIMESTAMP (KIP-937)."),
        _topic_default("message.max.bytes", "max.message.bytes",
                "Largest record batch accepted from a producer."),
        Setting("socket.request.max.bytes", "104857600", _int_in(1, 2**31 - 1),
                "Largest request frame; larger ones close the connection unread."),
        Setting("queued.max.requests", "500", _int_in(1, 100_000),
                "Requests read ahead per connection before reading pauses."),
        Setting("fetch.max.bytes", "57671680", _int_in(1024, 2**31 - 1),
                "Most record bytes one Fetch response carries (with the request's own "
                "max_bytes; KIP-74: a first batch larger than it still comes whole)."),
        Setting("queued.max.request.bytes", "536870912", _budget_bytes,
                "Bytes of requests in flight over all connections (each frame's size, "
                "reserved when its size prefix is read, until it is answered); while "
                "none is left, connections starting a new frame stop reading. -1: no "
                "limit (Kafka's default; ours is 512 MiB)."),
        # -- consumer groups (logserver/groups) ---------------------------------------
        Setting("group.min.session.timeout.ms", "6000", _int_in(1, 2**31 - 1),
                "Smallest session timeout a group member may ask for (else INVALID_SESSION_TIMEOUT)."),
        Setting("group.max.session.timeout.ms", "1800000", _int_in(1, 2**31 - 1),
                "Largest session timeout a group member may ask for (else INVALID_SESSION_TIMEOUT)."),
        Setting("group.initial.rebalance.delay.ms", "3000", _int_in(0, 2**31 - 1),
                "How long the first rebalance of an empty group waits for more members to join."),
        Setting("group.max.size", str(2**31 - 1), _int_in(1, 2**31 - 1),
                "Most members one group may have (else GROUP_MAX_SIZE_REACHED)."),
        # the consumer group protocol, KIP-848 (logserver/groups/consumer)
        Setting("group.consumer.session.timeout.ms", "45000", _int_in(1, 2**31 - 1),
                "A consumer-protocol member that sends no ConsumerGroupHeartbeat for this "
                "long is removed and its partitions go to the others."),
        Setting("group.consumer.heartbeat.interval.ms", "5000", _int_in(1, 2**31 - 1),
                "How often consumer-protocol members are told to heartbeat."),
        Setting("group.consumer.assignors", "uniform,range", _assignor_list,
                "Server-side assignors members may name (uniform, range); the first is "
                "the default."),
        Setting("group.consumer.max.size", str(2**31 - 1), _int_in(1, 2**31 - 1),
                "Most members one consumer-protocol group may have (else "
                "GROUP_MAX_SIZE_REACHED)."),
        Setting("offsets.topic.num.partitions", "1", _int_in(1, 1000),
                "Partitions of the internal __consumer_offsets topic when it is created "
                "(one node gains nothing from more; in cluster mode 50 unless set, as "
                "Kafka, so that group coordinators spread over the brokers)."),
        Setting("offsets.topic.replication.factor", "3", _int_in(1, 32767),
                "Replicas of __consumer_offsets in cluster mode, capped by the live brokers "
                "when it is created (one node: 1)."),
        Setting("offsets.topic.segment.bytes", "104857600", _int_in(14, 2**31 - 1),
                "Segment size of the internal __consumer_offsets topic."),
        Setting("offsets.retention.minutes", "10080", _int_in(1, 2**31 - 1),
                "Committed offsets of a group that has been empty this long are deleted."),
        Setting("offsets.retention.check.interval.ms", "600000", _int_in(1),
                "How often expired committed offsets are looked for."),
        Setting("offset.metadata.max.bytes", "4096", _int_in(0, 2**31 - 1),
                "Longest metadata string of a committed offset (else OFFSET_METADATA_TOO_LARGE)."),
        # -- transactions (logserver/transactions) ---------------------------------------
        Setting("transaction.max.timeout.ms", "900000", _int_in(1, 2**31 - 1),
                "Largest transaction.timeout.ms a producer may ask for (else INVALID_TRANSACTION_TIMEOUT)."),
        Setting("transaction.abort.timed.out.transaction.cleanup.interval.ms", "10000", _int_in(1),
                "How often transactions open longer than their timeout are looked for and aborted."),
        Setting("transactional.id.expiration.ms", "604800000", _int_in(1, 2**31 - 1),
                "A transactional id with no transaction open and no request this long is forgotten."),
        Setting("transaction.state.log.num.partitions", "1", _int_in(1, 1000),
                "Partitions of the internal __transaction_state topic when it is created "
                "(Kafka: 50, for spreading coordinators over brokers; one node gains nothing)."),
        Setting("transaction.state.log.replication.factor", "3", _int_in(1, 32767),
                "Replicas of __transaction_state in cluster mode, capped by the live brokers "
                "when it is created (one node: 1)."),
        Setting("transaction.state.log.min.isr", "2", _int_in(1, 32767),
                "Cluster mode: fewest in-sync replicas (capped by the replication factor) "
                "with which the transaction coordinator writes its state."),
        Setting("transaction.state.log.segment.bytes", "104857600", _int_in(14, 2**31 - 1),
                "Segment size of the internal __transaction_state topic."),
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
                "Most partitions over all topics (beyond it: POLICY_VIOLATION). Partitions "
                "hold no descriptors of their own (see log.file.handles.max), so the "
                "descriptor limit does not bound them."),
        _topic_default("log.retention.ms", "retention.ms",
                "Delete closed segments whose newest record is older than this; -1 keeps forever."),
        _topic_default("log.retention.bytes", "retention.bytes",
                "Delete the oldest closed segments while a partition is larger than this; -1: no limit."),
        Setting("log.retention.check.interval.ms", "300000", _int_in(1),
                "How often retention (deletion by time and size) runs."),
        Setting("log.cleaner.backoff.ms", "15000", _int_in(0),
                "How long the log cleaner sleeps when no compacted log has segments to "
                "clean; compaction runs on this cadence, not on the retention interval."),
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
        # -- authorization (logserver/security) ----------------------------------------
        Setting("authorizer.class.name", "", parse_authorizer_class,
                "Turn ACL authorization on: org.apache.kafka.metadata.authorizer.StandardAuthorizer "
                "or kafka.security.authorizer.AclAuthorizer (the same here); empty: everything "
                "is allowed and the ACL APIs answer SECURITY_DISABLED."),
        Setting("super.users", "", str,
                "Principals allowed everything, separated by semicolons (User:admin;User:ops)."),
        Setting("allow.everyone.if.no.acl.found", "false", _parse_bool,
                "Allow a request on a resource no ACL applies to (else it is denied)."),
        # -- listener security: TLS and SASL (logserver/security) -----------------------
        Setting("listener.security.protocol.map", DEFAULT_PROTOCOL_MAP, normalize_protocol_map,
                "Security protocol of each listener name, NAME:PROTOCOL (PLAINTEXT, SSL, "
                "SASL_PLAINTEXT, SASL_SSL), comma separated."),
        Setting("ssl.keystore.type", "PEM", parse_store_type, "Keystore format; only PEM."),
        Setting("ssl.keystore.location", None, str,
                "PEM file with the private key and certificate chain of the TLS listeners."),
        Setting("ssl.keystore.certificate.chain", None, str,
                "The certificate chain itself, PEM text (instead of ssl.keystore.location)."),
        Setting("ssl.keystore.key", None, str,
                "The private key itself, PEM text (with ssl.keystore.certificate.chain).",
                sensitive=True),
        Setting("ssl.key.password", None, str, "Password of an encrypted private key.",
                sensitive=True),
        Setting("ssl.truststore.type", "PEM", parse_store_type, "Truststore format; only PEM."),
        Setting("ssl.truststore.location", None, str,
                "PEM file of the CA certificates that sign client certificates."),
        Setting("ssl.truststore.certificates", None, str,
                "The trusted CA certificates themselves, PEM text."),
        Setting("ssl.client.auth", "none", parse_client_auth,
                "Client certificates on TLS listeners: none, requested (verified if sent) or "
                "required."),
        Setting("ssl.enabled.protocols", "TLSv1.2,TLSv1.3", parse_tls_versions,
                "TLS versions the TLS listeners accept: TLSv1.2, TLSv1.3."),
        Setting("sasl.enabled.mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512", parse_mechanisms,
                "SASL mechanisms offered on SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512."),
        Setting("sasl.server.max.receive.size", "524288", _int_in(8, 2**31 - 1),
                "Largest frame accepted before a SASL client has authenticated; larger ones "
                "close the connection."),
        Setting("connection.failed.authentication.delay.ms", "100", _int_in(0, 2**31 - 1),
                "How long the answer to a failed SASL authentication is held back (then the "
                "connection closes), to slow down password guessing; also the first wait "
                "before the next login from an address whose login just failed."),
        Setting("connection.failed.authentication.delay.max.ms", "10000",
                _int_in(0, 2**31 - 1),
                "Each failed SASL login from an address doubles the wait before that "
                "address's next login is answered (connection.failed.authentication.delay.ms "
                "first), up to this; a successful login clears it; other addresses do not wait."),
        # -- cluster mode (logserver/cluster; off unless cluster.etcd.endpoints is set) --
        Setting("cluster.etcd.endpoints", None, str,
                "etcd client addresses, host:port comma separated; set, the broker joins a "
                "cluster (node.id must be unique); unset, it runs alone with no etcd."),
        Setting("cluster.etcd.prefix", "/logserver", str,
                "Key prefix of this cluster's state in etcd (several clusters may share one etcd)."),
        Setting("broker.rack", None, str, "This broker's rack; replicas are spread over racks."),
        Setting("inter.broker.listener.name", None, str,
                "The listener followers fetch from (cluster mode); unset: the first listener."),
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
        Setting("leader.replication.throttled.rate", str(2**63 - 1), _int_in(1),
                "Bytes/s this broker sends, leading, to out-of-sync followers of the replicas "
                "a topic's leader.replication.throttled.replicas lists (dynamic; cluster mode)."),
        Setting("follower.replication.throttled.rate", str(2**63 - 1), _int_in(1),
                "Bytes/s this broker fetches, following, for the replicas a topic's "
                "follower.replication.throttled.replicas lists while out of sync (dynamic; "
                "cluster mode)."),
        Setting("controlled.shutdown.enable", "true", _parse_bool,
                "On SIGTERM, move this broker's leaderships to other in-sync replicas and "
                "leave every ISR before closing the listeners (cluster mode)."),
        Setting("unclean.leader.election.enable", "false", _parse_bool,
                "Let a replica outside the ISR become leader when no ISR member is alive "
                "(loses acknowledged records; cluster mode)."),
    ]
}


class Config(Mapping[str, Any]):
    """Parsed settings; access with Kafka's names, e.g. ``config["log.dirs"]``."""

    def __init__(self, values: Mapping[str, Any], sources: Mapping[str, str],
                 per_listener: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self._values = dict(values)
        self.sources = dict(sources)
        #: listener.name.<LISTENER>.<setting> overrides, parsed: {LISTENER: {setting: value}}
        self.per_listener = {name: dict(v) for name, v in (per_listener or {}).items()}

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

    def replace(self, **changes: tuple[Any, str]) -> Config:
        """This config with settings replaced: name=(value, where it came from)."""
        values, sources = dict(self._values), dict(self.sources)
        for name, (value, source) in changes.items():
            values[name], sources[name] = value, source
        return Config(values, sources)

    def with_bound_ports(self, ports: Iterable[int]) -> Config:
        """Fill in the real port of listeners given as port 0, for advertising."""
        bound = [Listener(li.name, li.host, port) for li, port in zip(self["listeners"], ports, strict=True)]
        values = dict(self._values, listeners=bound)
        if self._values["advertised.listeners"] is None:
            # As Kafka: a listener on every interface is advertised under the host's name.
            values["advertised.listeners"] = [
                Listener(li.name, socket.getfqdn(), li.port) if li.host in WILDCARD_HOSTS else li
                for li in bound]
        return Config(values, self.sources, self.per_listener)


def read_properties(path: Path) -> dict[str, str]:
    """Java .properties subset: key=value or key: value, # and ! comments."""
    result: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"config file {path}: {exc.strerror}") from exc
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        number, raw = index + 1, lines[index]
        index += 1
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        # Java properties: an odd number of trailing backslashes continues the value on the
        # next line, without that line's leading blanks (Kafka's in-line PEM settings).
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1 and index < len(lines):
            line = line[:-1] + lines[index].lstrip()
            index += 1
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
    listener_raw: dict[str, str] = {}  # listener.name.<listener>.<setting>, as given
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
                if is_jaas_setting(key):
                    if key not in warned:
                        warned.add(key)
                        log.warning("ignoring Kafka setting %s (%s): %s", key, where, JAAS_IGNORED)
                    continue
                if per_listener_setting(key) is not None:
                    listener_raw[key] = value
                    continue
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
    per_listener: dict[str, dict[str, Any]] = {}
    for key, text in listener_raw.items():
        listener, name = per_listener_setting(key) or ("", "")
        try:
            per_listener.setdefault(listener, {})[name] = SETTINGS[name].parse(text)
        except ValueError as exc:
            raise ConfigError(f"invalid value for setting {key!r}: {exc}") from exc
    return Config(values, sources, per_listener)


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
