"""MQTT control packets as plain data classes (both directions: the server and test clients)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .constants import MQTT_311, PacketType, Reason


@dataclass(slots=True)
class Will:
    topic: str
    payload: bytes
    qos: int = 0
    retain: bool = False
    properties: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Connect:
    client_id: str
    protocol_level: int = MQTT_311
    clean_start: bool = True
    keep_alive: int = 60
    username: str | None = None
    password: bytes | None = None
    will: Will | None = None
    properties: dict[str, Any] = field(default_factory=dict)
    type = PacketType.CONNECT


@dataclass(slots=True)
class Connack:
    session_present: bool = False
    reason: int = Reason.SUCCESS
    properties: dict[str, Any] = field(default_factory=dict)
    type = PacketType.CONNACK


@dataclass(slots=True)
class Publish:
    topic: str
    payload: bytes = b""
    qos: int = 0
    retain: bool = False
    dup: bool = False
    packet_id: int = 0
    properties: dict[str, Any] = field(default_factory=dict)
    type = PacketType.PUBLISH


@dataclass(slots=True)
class Ack:
    """PUBACK, PUBREC, PUBREL or PUBCOMP: same shape, told apart by ``kind``."""

    kind: PacketType
    packet_id: int
    reason: int = Reason.SUCCESS
    properties: dict[str, Any] = field(default_factory=dict)

    @property
    def type(self) -> PacketType:
        return self.kind


@dataclass(slots=True)
class SubOptions:
    qos: int = 0
    no_local: bool = False
    retain_as_published: bool = False
    retain_handling: int = 0


@dataclass(slots=True)
class Subscribe:
    packet_id: int
    topics: list[tuple[str, SubOptions]]
    properties: dict[str, Any] = field(default_factory=dict)
    type = PacketType.SUBSCRIBE


@dataclass(slots=True)
class Suback:
    packet_id: int
    reasons: list[int]
    properties: dict[str, Any] = field(default_factory=dict)
    type = PacketType.SUBACK


@dataclass(slots=True)
class Unsubscribe:
    packet_id: int
    topics: list[str]
    properties: dict[str, Any] = field(default_factory=dict)
    type = PacketType.UNSUBSCRIBE


@dataclass(slots=True)
class Unsuback:
    packet_id: int
    reasons: list[int] = field(default_factory=list)
    properties: dict[str, Any] = field(default_factory=dict)
    type = PacketType.UNSUBACK


@dataclass(slots=True)
class Pingreq:
    type = PacketType.PINGREQ


@dataclass(slots=True)
class Pingresp:
    type = PacketType.PINGRESP


@dataclass(slots=True)
class Disconnect:
    reason: int = Reason.SUCCESS
    properties: dict[str, Any] = field(default_factory=dict)
    type = PacketType.DISCONNECT


@dataclass(slots=True)
class Auth:
    reason: int = Reason.SUCCESS
    properties: dict[str, Any] = field(default_factory=dict)
    type = PacketType.AUTH


Packet = (
    Connect | Connack | Publish | Ack | Subscribe | Suback | Unsubscribe | Unsuback
    | Pingreq | Pingresp | Disconnect | Auth
)
