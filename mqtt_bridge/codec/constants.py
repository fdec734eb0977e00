"""MQTT packet types, protocol levels and reason codes (3.1.1 return codes and 5.0 reason codes)."""

from __future__ import annotations

from enum import IntEnum

MQTT_311 = 4
MQTT_31 = 3
MQTT_5 = 5
PROTOCOL_NAMES = {MQTT_311: b"MQTT", MQTT_5: b"MQTT", MQTT_31: b"MQIsdp"}

#: The largest value the 4-byte remaining-length varint can carry.
MAX_REMAINING_LENGTH = 268_435_455


class PacketType(IntEnum):
    CONNECT = 1
    CONNACK = 2
    PUBLISH = 3
    PUBACK = 4
    PUBREC = 5
    PUBREL = 6
    PUBCOMP = 7
    SUBSCRIBE = 8
    SUBACK = 9
    UNSUBSCRIBE = 10
    UNSUBACK = 11
    PINGREQ = 12
    PINGRESP = 13
    DISCONNECT = 14
    AUTH = 15


class Reason(IntEnum):
    """MQTT 5 reason codes; the 3.1.1 CONNACK return codes are mapped from these."""

    SUCCESS = 0x00
    GRANTED_QOS_1 = 0x01
    GRANTED_QOS_2 = 0x02
    DISCONNECT_WITH_WILL = 0x04
    NO_MATCHING_SUBSCRIBERS = 0x10
    NO_SUBSCRIPTION_EXISTED = 0x11
    UNSPECIFIED_ERROR = 0x80
    MALFORMED_PACKET = 0x81
    PROTOCOL_ERROR = 0x82
    IMPLEMENTATION_SPECIFIC_ERROR = 0x83
    UNSUPPORTED_PROTOCOL_VERSION = 0x84
    CLIENT_IDENTIFIER_NOT_VALID = 0x85
    BAD_USER_NAME_OR_PASSWORD = 0x86
    NOT_AUTHORIZED = 0x87
    SERVER_UNAVAILABLE = 0x88
    SERVER_BUSY = 0x89
    BANNED = 0x8A
    SERVER_SHUTTING_DOWN = 0x8B
    BAD_AUTHENTICATION_METHOD = 0x8C
    KEEP_ALIVE_TIMEOUT = 0x8D
    SESSION_TAKEN_OVER = 0x8E
    TOPIC_FILTER_INVALID = 0x8F
    TOPIC_NAME_INVALID = 0x90
    PACKET_IDENTIFIER_IN_USE = 0x91
    PACKET_IDENTIFIER_NOT_FOUND = 0x92
    RECEIVE_MAXIMUM_EXCEEDED = 0x93
    TOPIC_ALIAS_INVALID = 0x94
    PACKET_TOO_LARGE = 0x95
    MESSAGE_RATE_TOO_HIGH = 0x96
    QUOTA_EXCEEDED = 0x97
    ADMINISTRATIVE_ACTION = 0x98
    PAYLOAD_FORMAT_INVALID = 0x99
    RETAIN_NOT_SUPPORTED = 0x9A
    QOS_NOT_SUPPORTED = 0x9B
    USE_ANOTHER_SERVER = 0x9C
    SERVER_MOVED = 0x9D
    SHARED_SUBSCRIPTIONS_NOT_SUPPORTED = 0x9E
    CONNECTION_RATE_EXCEEDED = 0x9F
    MAXIMUM_CONNECT_TIME = 0xA0
    SUBSCRIPTION_IDENTIFIERS_NOT_SUPPORTED = 0xA1
    WILDCARD_SUBSCRIPTIONS_NOT_SUPPORTED = 0xA2


#: MQTT 3.1.1 CONNACK return codes for the v5 reasons a CONNACK can carry.
CONNACK_V3 = {
    Reason.SUCCESS: 0,
    Reason.UNSUPPORTED_PROTOCOL_VERSION: 1,
    Reason.CLIENT_IDENTIFIER_NOT_VALID: 2,
    Reason.SERVER_UNAVAILABLE: 3,
    Reason.SERVER_BUSY: 3,
    Reason.QUOTA_EXCEEDED: 3,
    Reason.CONNECTION_RATE_EXCEEDED: 3,
    Reason.SERVER_SHUTTING_DOWN: 3,
    Reason.BAD_USER_NAME_OR_PASSWORD: 4,
    Reason.NOT_AUTHORIZED: 5,
}


def connack_v3_code(reason: int) -> int:
    """3.1.1 return code for a v5 CONNACK reason (anything unknown becomes 'not authorized')."""
    return CONNACK_V3.get(Reason(reason), 5) if reason in Reason._value2member_map_ else 5
