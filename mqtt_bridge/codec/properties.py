"""MQTT 5 properties, declared once as a table (id, name, wire type, packets allowed in).

Decoding and encoding are driven by the table; user properties (0x26) are the one
property that may repeat and keep their order, so they live in their own list.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from .constants import Reason
from .errors import MalformedPacket, ProtocolViolation
from .primitives import (
    decode_varint,
    encode_varint,
    read_binary,
    read_utf8,
    write_binary,
    write_utf8,
)

# Wire types
BYTE, U16, U32, VARINT, UTF8, BINARY, PAIR = range(7)

#: Where a property may appear: packet types, and ``WILL`` for a CONNECT's will properties.
WILL = 0
_C, _CA, _P, _PA, _PREC, _PREL, _PCOMP = 1, 2, 3, 4, 5, 6, 7
_S, _SA, _U, _UA, _D, _A = 8, 9, 10, 11, 14, 15
_MESSAGE = frozenset((_P, WILL))
_ACKS = frozenset((_PA, _PREC, _PREL, _PCOMP))

#: id -> (attribute name, wire type, where allowed). Declarative table from MQTT 5.0
#: section 2.2.2.2; a property elsewhere makes the packet malformed.
PROPERTY_TABLE: dict[int, tuple[str, int, frozenset[int]]] = {
    0x01: ("payload_format_indicator", BYTE, _MESSAGE),
    0x02: ("message_expiry_interval", U32, _MESSAGE),
    0x03: ("content_type", UTF8, _MESSAGE),
    0x08: ("response_topic", UTF8, _MESSAGE),
    0x09: ("correlation_data", BINARY, _MESSAGE),
    0x0B: ("subscription_identifier", VARINT, frozenset((_P, _S))),
    0x11: ("session_expiry_interval", U32, frozenset((_C, _CA, _D))),
    0x12: ("assigned_client_identifier", UTF8, frozenset((_CA,))),
    0x13: ("server_keep_alive", U16, frozenset((_CA,))),
    0x15: ("authentication_method", UTF8, frozenset((_C, _CA, _A))),
    0x16: ("authentication_data", BINARY, frozenset((_C, _CA, _A))),
    0x17: ("request_problem_information", BYTE, frozenset((_C,))),
    0x18: ("will_delay_interval", U32, frozenset((WILL,))),
    0x19: ("request_response_information", BYTE, frozenset((_C,))),
    0x1A: ("response_information", UTF8, frozenset((_CA,))),
    0x1C: ("server_reference", UTF8, frozenset((_CA, _D))),
    0x1F: ("reason_string", UTF8, frozenset((_CA, *_ACKS, _SA, _UA, _D, _A))),
    0x21: ("receive_maximum", U16, frozenset((_C, _CA))),
    0x22: ("topic_alias_maximum", U16, frozenset((_C, _CA))),
    0x23: ("topic_alias", U16, frozenset((_P,))),
    0x24: ("maximum_qos", BYTE, frozenset((_CA,))),
    0x25: ("retain_available", BYTE, frozenset((_CA,))),
    0x26: ("user_property", PAIR, frozenset((_C, _CA, *_MESSAGE, *_ACKS, _S, _SA, _U, _UA, _D, _A))),
    0x27: ("maximum_packet_size", U32, frozenset((_C, _CA))),
    0x28: ("wildcard_subscription_available", BYTE, frozenset((_CA,))),
    0x29: ("subscription_identifier_available", BYTE, frozenset((_CA,))),
    0x2A: ("shared_subscription_available", BYTE, frozenset((_CA,))),
}
NAME_TO_ID = {name: pid for pid, (name, _t, _w) in PROPERTY_TABLE.items()}
#: Properties whose value may not be zero (MQTT 5.0: protocol error).
NONZERO = {"receive_maximum", "maximum_packet_size", "topic_alias", "subscription_identifier"}
#: Properties that are 0 or 1 (MQTT 5.0: any other value is a protocol error).
YES_NO = {
    "request_problem_information", "request_response_information", "maximum_qos", "retain_available",
    "wildcard_subscription_available", "subscription_identifier_available", "shared_subscription_available",
}

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")


class Properties(dict):  # values differ per property id; typed by their accessors
    """Decoded properties by name; ``user_properties`` is a list of (key, value) pairs."""

    @property
    def user_properties(self) -> list[tuple[str, str]]:
        return self.get("user_property", [])


def decode_properties(buf: bytes, pos: int, end: int, where: int) -> tuple[Properties, int]:
    """Decode a property block starting with its varint length at ``pos``, of a packet of
    type ``where`` (or ``WILL``)."""
    length, pos = decode_varint(buf, pos)
    stop = pos + length
    if stop > end:
        raise MalformedPacket("property length runs past the packet")
    props = Properties()
    subids: list[int] = []
    while pos < stop:
        pid, pos = decode_varint(buf, pos)
        entry = PROPERTY_TABLE.get(pid)
        if entry is None:
            raise MalformedPacket(f"unknown property id {pid:#x}")
        name, kind, allowed = entry
        if where not in allowed:
            raise MalformedPacket(f"property {name} not allowed in packet type {where}")
        value: Any
        if kind == BYTE:
            if pos >= stop:
                raise MalformedPacket("truncated property")
            value = buf[pos]
            pos += 1
        elif kind == U16:
            if pos + 2 > stop:
                raise MalformedPacket("truncated property")
            value = _U16.unpack_from(buf, pos)[0]
            pos += 2
        elif kind == U32:
            if pos + 4 > stop:
                raise MalformedPacket("truncated property")
            value = _U32.unpack_from(buf, pos)[0]
            pos += 4
        elif kind == VARINT:
            value, pos = decode_varint(buf, pos)
        elif kind == UTF8:
            value, pos = read_utf8(buf, pos, stop)
        elif kind == BINARY:
            value, pos = read_binary(buf, pos, stop)
        else:
            k, pos = read_utf8(buf, pos, stop)
            v, pos = read_utf8(buf, pos, stop)
            props.setdefault("user_property", []).append((k, v))
            continue
        if name in NONZERO and value == 0:
            if name == "topic_alias":  # MQTT 5 3.3.2.3.4: 0x94, not a plain protocol error
                raise ProtocolViolation("topic alias 0", Reason.TOPIC_ALIAS_INVALID)
            raise ProtocolViolation(f"property {name} must not be 0")
        if name in YES_NO and value > 1:
            raise ProtocolViolation(f"property {name} is {value}, not 0 or 1")
        if name == "subscription_identifier":
            subids.append(value)
            continue
        if name in props:
            raise ProtocolViolation(f"property {name} appears twice")
        props[name] = value
    if pos != stop:
        raise MalformedPacket("property block length mismatch")
    if subids:
        props["subscription_identifier"] = subids if len(subids) > 1 else subids[0]
    return props, pos


_WRITERS: dict[int, Callable[[bytearray, Any], None]] = {
    BYTE: lambda out, v: out.append(v),
    U16: lambda out, v: out.extend(_U16.pack(v)),
    U32: lambda out, v: out.extend(_U32.pack(v)),
    VARINT: lambda out, v: out.extend(encode_varint(v)),
    UTF8: write_utf8,
    BINARY: write_binary,
}


def encode_properties(props: dict[str, Any] | None) -> bytes:
    """The property block (varint length + properties); ``b"\\x00"`` when empty."""
    if not props:
        return b"\x00"
    body = bytearray()
    for name, value in props.items():
        if value is None:
            continue
        pid = NAME_TO_ID[name]
        kind = PROPERTY_TABLE[pid][1]
        if kind == PAIR:
            for k, v in value:
                body.extend(encode_varint(pid))
                write_utf8(body, k)
                write_utf8(body, v)
            continue
        values = value if (name == "subscription_identifier" and isinstance(value, list)) else [value]
        for v in values:
            body.extend(encode_varint(pid))
            _WRITERS[kind](body, v)
    return encode_varint(len(body)) + bytes(body)
