"""Sans-I/O MQTT 3.1.1 / 5.0 packet codec: bytes in, packets out, and back.

No sockets and no asyncio here, so the server, the tests and the benchmark load
generator share one codec.
"""

from __future__ import annotations

from .constants import MQTT_5, MQTT_31, MQTT_311, PacketType, Reason
from .decoder import PacketReader
from .encoder import encode, puback, publish_parts
from .errors import MalformedPacket, MqttError, PacketTooLarge, ProtocolViolation
from .packets import (
    Ack,
    Auth,
    Connack,
    Connect,
    Disconnect,
    Packet,
    Pingreq,
    Pingresp,
    Publish,
    Suback,
    SubOptions,
    Subscribe,
    Unsuback,
    Unsubscribe,
    Will,
)
from .topics import TopicError, topic_matches, validate_filter, validate_topic

__all__ = [
    "MQTT_5",
    "MQTT_31",
    "MQTT_311",
    "Ack",
    "Auth",
    "Connack",
    "Connect",
    "Disconnect",
    "MalformedPacket",
    "MqttError",
    "Packet",
    "PacketReader",
    "PacketTooLarge",
    "PacketType",
    "Pingreq",
    "Pingresp",
    "ProtocolViolation",
    "Publish",
    "Reason",
    "SubOptions",
    "Suback",
    "Subscribe",
    "TopicError",
    "Unsuback",
    "Unsubscribe",
    "Will",
    "encode",
    "puback",
    "publish_parts",
    "topic_matches",
    "validate_filter",
    "validate_topic",
]
