"""Encode MQTT packets to bytes (server replies, and the packets test clients send).

``publish_parts`` splits a PUBLISH around its packet identifier so one encoding of a
downlink message (topic, properties, payload) is shared by every subscriber: each
connection writes ``head``, its own 2-byte packet id, and the shared ``tail``.
"""

from __future__ import annotations

import struct
from typing import Any

from .constants import MQTT_5, PacketType, Reason, connack_v3_code
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
    Subscribe,
    Unsuback,
    Unsubscribe,
)
from .primitives import encode_varint, write_binary, write_utf8
from .properties import encode_properties

_U16 = struct.Struct(">H")
PINGRESP = b"\xd0\x00"
PINGREQ = b"\xc0\x00"
DISCONNECT_V3 = b"\xe0\x00"
#: PUBACK packets for 3.1.1 / v5-success by packet id are built on demand from this prefix.
_PUBACK_PREFIX = b"\x40\x02"


def _frame(first: int, body: bytes | bytearray) -> bytes:
    return bytes((first,)) + encode_varint(len(body)) + bytes(body)


def puback(packet_id: int, kind: int = PacketType.PUBACK, reason: int = 0, version: int = 4) -> bytes:
    """PUBACK/PUBREC/PUBREL/PUBCOMP; the short 2-byte form whenever the reason is success."""
    first = (kind << 4) | (2 if kind == PacketType.PUBREL else 0)
    if reason == 0 or version != MQTT_5:
        return bytes((first, 2)) + _U16.pack(packet_id)
    return bytes((first, 3)) + _U16.pack(packet_id) + bytes((reason,))


def publish_parts(
    topic: str,
    payload: bytes,
    qos: int,
    retain: bool,
    version: int,
    properties: dict[str, Any] | None = None,
    dup: bool = False,
) -> tuple[bytes, bytes]:
    """``(head, tail)``: for QoS 0 the whole packet is ``head + tail``; for QoS 1/2 the
    packet identifier goes between them. ``tail`` holds properties and payload."""
    t = topic.encode("utf-8")
    props = encode_properties(properties) if version == MQTT_5 else b""
    remaining = 2 + len(t) + (2 if qos else 0) + len(props) + len(payload)
    first = 0x30 | (qos << 1) | (1 if retain else 0) | (0x08 if dup else 0)
    head = bytes((first,)) + encode_varint(remaining) + _U16.pack(len(t)) + t
    if props:
        return head, props + payload
    return head, payload


def encode(packet: Packet, version: int) -> bytes:
    """Encode any packet for a connection speaking ``version`` (4 = 3.1.1, 5 = 5.0)."""
    v5 = version == MQTT_5
    if isinstance(packet, Publish):
        head, tail = publish_parts(
            packet.topic, packet.payload, packet.qos, packet.retain, version,
            packet.properties, packet.dup,
        )
        if packet.qos:
            return head + _U16.pack(packet.packet_id) + tail
        return head + tail
    if isinstance(packet, Ack):
        if v5 and (packet.reason or packet.properties):
            body = _U16.pack(packet.packet_id) + bytes((packet.reason,))
            if packet.properties:
                body += encode_properties(packet.properties)
            first = (packet.kind << 4) | (2 if packet.kind == PacketType.PUBREL else 0)
            return _frame(first, body)
        return puback(packet.packet_id, packet.kind)
    if isinstance(packet, Connack):
        if v5:
            body = bytes((int(packet.session_present), packet.reason)) + encode_properties(
                packet.properties
            )
        else:
            body = bytes((int(packet.session_present), connack_v3_code(packet.reason)))
        return _frame(0x20, body)
    if isinstance(packet, Suback):
        body = _U16.pack(packet.packet_id) + (encode_properties(packet.properties) if v5 else b"")
        codes = packet.reasons if v5 else [c if c < 0x80 else 0x80 for c in packet.reasons]
        return _frame(0x90, body + bytes(codes))
    if isinstance(packet, Unsuback):
        body = _U16.pack(packet.packet_id)
        if v5:
            body += encode_properties(packet.properties) + bytes(packet.reasons)
        return _frame(0xB0, body)
    if isinstance(packet, Pingresp):
        return PINGRESP
    if isinstance(packet, Pingreq):
        return PINGREQ
    if isinstance(packet, Disconnect):
        if not v5:
            return DISCONNECT_V3
        if packet.reason == Reason.SUCCESS and not packet.properties:
            return DISCONNECT_V3
        return _frame(0xE0, bytes((packet.reason,)) + encode_properties(packet.properties))
    if isinstance(packet, Auth):
        return _frame(0xF0, bytes((packet.reason,)) + encode_properties(packet.properties))
    if isinstance(packet, Connect):
        return _encode_connect(packet)
    if isinstance(packet, Subscribe):
        out = bytearray(_U16.pack(packet.packet_id))
        if v5:
            out += encode_properties(packet.properties)
        for topic, opts in packet.topics:
            write_utf8(out, topic)
            opt = opts.qos
            if v5:
                opt |= (
                    (4 if opts.no_local else 0)
                    | (8 if opts.retain_as_published else 0)
                    | (opts.retain_handling << 4)
                )
            out.append(opt)
        return _frame(0x82, out)
    if isinstance(packet, Unsubscribe):
        out = bytearray(_U16.pack(packet.packet_id))
        if v5:
            out += encode_properties(packet.properties)
        for topic in packet.topics:
            write_utf8(out, topic)
        return _frame(0xA2, out)
    raise TypeError(f"cannot encode {type(packet).__name__}")


def _encode_connect(p: Connect) -> bytes:
    v5 = p.protocol_level == MQTT_5
    body = bytearray()
    write_binary(body, b"MQIsdp" if p.protocol_level == 3 else b"MQTT")
    body.append(p.protocol_level)
    flags = 0x02 if p.clean_start else 0
    if p.will is not None:
        flags |= 0x04 | (p.will.qos << 3) | (0x20 if p.will.retain else 0)
    if p.username is not None:
        flags |= 0x80
    if p.password is not None:
        flags |= 0x40
    body.append(flags)
    body += _U16.pack(p.keep_alive)
    if v5:
        body += encode_properties(p.properties)
    write_utf8(body, p.client_id)
    if p.will is not None:
        if v5:
            body += encode_properties(p.will.properties)
        write_utf8(body, p.will.topic)
        write_binary(body, p.will.payload)
    if p.username is not None:
        write_utf8(body, p.username)
    if p.password is not None:
        write_binary(body, p.password)
    return _frame(0x10, body)
