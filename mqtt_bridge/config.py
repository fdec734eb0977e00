"""Bridge settings with their defaults (the CLI and config files fill these in)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from .mapping import DEFAULT_DOWNLINK, DEFAULT_UPLINK, DEFAULT_UPLINK_TOPICS


@dataclass
class BridgeConfig:
    host: str = "127.0.0.1"
    port: int = 1883
    bootstrap_servers: str = "127.0.0.1:9092"
    uplink: list[str] = field(default_factory=lambda: list(DEFAULT_UPLINK))
    downlink: list[str] = field(default_factory=lambda: list(DEFAULT_DOWNLINK))
    # limits
    max_connections: int = 100_000
    max_connection_rate: int = 2_000  # new connections per second from one address (burst: 1 s)
    failed_login_delay_ms: int = 100  # wait before an address's next login after a failure, doubling
    failed_login_delay_max_ms: int = 10_000  # ... up to this
    max_subscriptions: int = 100  # per client
    max_packet_size: int = 1 << 20
    max_topics: int = 1_000  # distinct Kafka topics the uplink may write to
    max_client_id_bytes: int = 256
    max_inflight: int = 32  # outgoing QoS 1 window per connection (capped by receive maximum)
    max_queued: int = 1_000  # outgoing messages waiting per session
    max_sessions: int = 200_000  # sessions in memory, online and offline; new ones refused above
    max_retained_messages: int = 100_000  # retained messages kept (0 = no limit)
    max_retained_bytes: int = 256 << 20  # their topics + payloads, bytes (0 = no limit)
    #: packets a client may send after CONNECT before its CONNACK (read, held, then handled)
    max_packets_before_connack: int = 1_000
    #: bytes a client may send after CONNECT before its CONNACK (else packets x packet size)
    max_bytes_before_connack: int = 2 << 20
    max_topic_levels: int = 128  # levels of a topic name or filter (EMQX's name and default)
    receive_maximum: int = 1_000  # incoming unacknowledged QoS 1/2 per v5 connection
    topic_alias_maximum: int = 32
    connect_timeout_s: float = 10.0
    # security
    credentials_file: str | None = None  # mosquitto_passwd file
    allow_anonymous: bool = True  # only without a credentials file
    acl_file: str | None = None  # mosquitto acl_file format; without it devices are bound to their id
    # Kafka topics the uplink may write (``*`` globs); a new stream outside it is refused
    uplink_topics: list[str] = field(default_factory=lambda: list(DEFAULT_UPLINK_TOPICS))
    plaintext: bool = True  # the plain listener on host:port
    #: SO_REUSEPORT on the MQTT listeners: several bridge processes share one port and the
    #: kernel spreads connections over them (each needs its own --bridge-id)
    reuse_port: bool = False
    tls_host: str | None = None  # default: host
    tls_port: int = 8883
    tls_certfile: str | None = None  # PEM; the TLS listener runs when this is set
    tls_keyfile: str | None = None
    tls_cafile: str | None = None  # CA of client certificates
    require_certificate: bool = False
    use_identity_as_username: bool = False  # the certificate's CN is the identity
    # MQTT over WebSockets (subprotocol mqtt, paths /mqtt and /); off unless a port is set
    ws_host: str | None = None  # default: host
    ws_port: int | None = None
    wss_host: str | None = None  # the same over TLS (the TLS listener's certificate)
    wss_port: int | None = None
    #: web pages (origins, e.g. https://app.example.com; * any) that may open WebSocket
    #: connections besides pages of this host (mqtt_bridge/ws_origin.py)
    ws_allowed_origins: list[str] = field(default_factory=list)
    # log side
    linger_ms: float = 0.0
    batch_bytes: int = 1 << 20
    producer_buffer_bytes: int = 64 << 20
    delivery_timeout_s: float = 120.0
    session_store: str = "auto"  # auto | group | topic
    session_topic: str = "__mqtt_bridge_sessions"
    group_prefix: str = "mqtt-bridge."
    session_commit_interval_s: float = 1.0
    max_session_bytes: int = 256 * 1024  # one saved session state (topic store); refusals above
    #: 3.1.1 persistent sessions (clean session 0) end this long after the client left; 0 = never
    persistent_client_expiration_s: int = 0
    retained_topic: str = "__mqtt_bridge_retained"  # compacted; key = MQTT topic
    #: this bridge among several in front of one log (default host:port); must be unique
    bridge_id: str | None = None
    #: how long a CONNECT waits for the bridge holding the session to hand it over
    takeover_timeout_s: float = 3.0
    # operations
    stats_interval_s: float = 30.0
    admin_host: str = "127.0.0.1"
    admin_port: int | None = None  # /metrics and /v1/status; None: no admin listener

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> BridgeConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown settings: {', '.join(sorted(unknown))}")
        cfg = cls(**values)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        if self.use_identity_as_username and not (self.tls_certfile and self.require_certificate):
            raise ValueError("use_identity_as_username needs the TLS listener with require_certificate")
        if self.require_certificate and not self.tls_cafile:
            raise ValueError("require_certificate needs tls_cafile")
        if self.wss_port is not None and not self.tls_certfile:
            raise ValueError("the WebSocket TLS listener (wss) needs tls_certfile")
        if not self.plaintext and not self.tls_certfile:
            raise ValueError("no listener: the plain one is off and no TLS certificate is given")
