"""Incremental MQTT packet decoder: feed bytes, get packets (sans-I/O).

One ``PacketReader`` per connection. It knows the protocol version after the first
CONNECT (or when told, on the client side) because MQTT 5 adds property blocks to
most packets. Every violation raises an :class:`MqttError` carrying the reason code
the connection must be closed with.
"""

from __future__ import annotations

from collections.abc import Callable

from .constants import MAX_REMAINING_LENGTH, MQTT_5, MQTT_31, MQTT_311, PacketType, Reason
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
from .primitives import read_binary, read_u16, read_utf8
from .properties import WILL, Properties, decode_properties

_EMPTY = Properties()
#: Fixed-header flags each packet type must carry (PUBLISH's are its own).
_REQUIRED_FLAGS = {t: 0 for t in PacketType} | {
    PacketType.PUBREL: 2,
    PacketType.SUBSCRIBE: 2,
    PacketType.UNSUBSCRIBE: 2,
}


_PUBLISH = int(PacketType.PUBLISH)
_TOPICS_KEPT = 16  # per connection; a reader seeing more starts over


class PacketReader:
    """Split a byte stream into packets and decode them.

    ``max_packet_size`` bounds the whole packet (fixed header included), checked as
    soon as the remaining length is known, before the body is buffered.
    """

    def __init__(self, max_packet_size: int = MAX_REMAINING_LENGTH + 5, version: int = 0) -> None:
        self.max_packet_size = max_packet_size
        self.version = version
        #: the start of a packet not complete yet; None while nothing waits (an idle
        #: connection holds no buffer: issue 27)
        self._buf: bytearray | None = None
        #: an error found after earlier packets of the same feed; raised by the next feed
        self.error: MqttError | None = None
        #: PUBLISH topic names seen lately, raw -> checked str; made on the first PUBLISH
        self._topics: dict[bytes, str] | None = None

    @property
    def buffered(self) -> int:
        return len(self._buf) if self._buf is not None else 0

    def feed(self, data: bytes) -> list[Packet]:
        """Append ``data``; return every complete packet now available, in order.

        If a bad packet follows good ones, the good ones are returned and the error is
        kept in ``error`` (and raised by the next call), so a CONNECT is not lost.
        """
        if self.error is not None:
            raise self.error
        pending = self._buf
        buf: bytes | bytearray
        if pending is not None:
            pending += data
            buf = pending
        else:
            buf = data
        out: list[Packet] = []
        pos = 0
        n = len(buf)
        # PUBLISH, nearly every packet under load, straight to its decoder (no dispatch,
        # no enum attribute lookups: those were a tenth of decoding one)
        publish = self._publish if self.version else None
        try:
            while n - pos >= 2:
                first = buf[pos]
                # remaining length, inline for the common 1-byte case
                b = buf[pos + 1]
                if b < 0x80:
                    length = b
                    head = 2
                else:
                    length = b & 0x7F
                    shift = 7
                    head = 2
                    while True:
                        if head >= 5:
                            raise MalformedPacket("remaining length longer than 4 bytes")
                        if pos + head >= n:
                            length = -1
                            break
                        b = buf[pos + head]
                        length |= (b & 0x7F) << shift
                        shift += 7
                        head += 1
                        if b < 0x80:
                            break
                    if length < 0:
                        break
                total = head + length
                if total > self.max_packet_size:
                    raise PacketTooLarge(total, self.max_packet_size)
                if n - pos < total:
                    break
                body = bytes(buf[pos + head : pos + total])
                pos += total
                if first >> 4 == _PUBLISH and publish is not None:
                    out.append(publish(first & 0x0F, body))
                else:
                    out.append(self._decode(first, body))
        except MqttError as exc:
            if not out:
                raise
            self.error = exc
        finally:
            if pos >= n:
                self._buf = None
            elif pending is not None:
                if pos:
                    del pending[:pos]
            else:
                self._buf = bytearray(buf[pos:])
        return out

    # ---- per packet type -------------------------------------------------------
    def _decode(self, first: int, body: bytes) -> Packet:
        ptype = first >> 4
        flags = first & 0x0F
        if ptype == PacketType.PUBLISH and self.version:
            return self._publish(flags, body)
        if ptype == 0:
            raise MalformedPacket("packet type 0 is reserved")
        if ptype == PacketType.AUTH and self.version and self.version != MQTT_5:
            raise MalformedPacket("AUTH packet in MQTT 3.1.1")
        if flags != _REQUIRED_FLAGS[PacketType(ptype)]:
            raise MalformedPacket(f"bad fixed header flags {flags:#x} for packet type {ptype}")
        if not self.version and ptype != PacketType.CONNECT:
            # Client side readers are given their version; a server sees CONNECT first.
            raise ProtocolViolation("first packet is not CONNECT")
        return _DECODERS[ptype](self, flags, body)

    def _props(self, body: bytes, pos: int, where: int) -> tuple[Properties, int]:
        if self.version == MQTT_5:
            return decode_properties(body, pos, len(body), where)
        return _EMPTY, pos

    def _connect(self, flags: int, body: bytes) -> Connect:
        end = len(body)
        name, pos = read_binary(body, 0, end)
        if pos >= end:
            raise MalformedPacket("truncated CONNECT")
        level = body[pos]
        pos += 1
        if name not in (b"MQTT", b"MQIsdp"):
            raise MqttError(Reason.UNSUPPORTED_PROTOCOL_VERSION, f"protocol name {name!r}")
        if level not in (MQTT_31, MQTT_311, MQTT_5) or (name == b"MQIsdp") != (level == MQTT_31):
            raise MqttError(Reason.UNSUPPORTED_PROTOCOL_VERSION, f"protocol level {level}")
        if pos >= end:
            raise MalformedPacket("truncated CONNECT")
        cflags = body[pos]
        pos += 1
        if cflags & 0x01:
            raise MalformedPacket("CONNECT reserved flag set")
        keep_alive, pos = read_u16(body, pos, end)
        self.version = level
        props, pos = self._props(body, pos, PacketType.CONNECT)
        client_id, pos = read_utf8(body, pos, end)
        will = None
        will_qos = (cflags >> 3) & 0x03
        will_retain = bool(cflags & 0x20)
        if cflags & 0x04:
            if will_qos == 3:
                raise MalformedPacket("will QoS 3")
            wprops, pos = self._props(body, pos, WILL)
            wtopic, pos = read_utf8(body, pos, end)
            wpayload, pos = read_binary(body, pos, end)
            will = Will(wtopic, wpayload, will_qos, will_retain, dict(wprops))
        elif will_qos or will_retain:
            raise MalformedPacket("will QoS/retain set without will flag")
        username = password = None
        if cflags & 0x80:
            username, pos = read_utf8(body, pos, end)
        elif cflags & 0x40 and level != MQTT_5:
            raise MalformedPacket("password flag without user name flag")
        if cflags & 0x40:
            password, pos = read_binary(body, pos, end)
        if pos != end:
            raise MalformedPacket("trailing bytes after CONNECT payload")
        return Connect(
            client_id=client_id,
            protocol_level=level,
            clean_start=bool(cflags & 0x02),
            keep_alive=keep_alive,
            username=username,
            password=password,
            will=will,
            properties=dict(props),
        )

    def _connack(self, flags: int, body: bytes) -> Connack:
        if len(body) < 2:
            raise MalformedPacket("truncated CONNACK")
        props, _ = self._props(body, 2, PacketType.CONNACK)
        return Connack(bool(body[0] & 1), body[1], dict(props))

    def _publish(self, flags: int, body: bytes) -> Publish:
        qos = (flags >> 1) & 0x03
        if qos == 3:
            raise MalformedPacket("PUBLISH with QoS 3")
        dup = bool(flags & 0x08)
        if dup and qos == 0:
            raise MalformedPacket("PUBLISH QoS 0 with DUP set")
        end = len(body)
        # a device sends to the same few topics: their names are decoded and checked once
        pos = 2 + ((body[0] << 8) | body[1]) if end >= 2 else end + 1
        topics = self._topics
        if topics is None:
            topics = self._topics = {}
        topic = topics.get(body[2:pos]) if pos <= end else None
        if topic is None:
            topic, pos = read_utf8(body, 0, end)
            if len(topics) >= _TOPICS_KEPT:
                topics.clear()
            topics[body[2:pos]] = topic
        packet_id = 0
        if qos:
            if pos + 2 > end:
                raise MalformedPacket("truncated two-byte integer")
            packet_id = (body[pos] << 8) | body[pos + 1]
            pos += 2
            if packet_id == 0:
                raise MalformedPacket("PUBLISH with packet identifier 0")
        props, pos = self._props(body, pos, PacketType.PUBLISH)
        return Publish(topic, body[pos:], qos, bool(flags & 1), dup, packet_id, props)

    def _ack(self, kind: PacketType, body: bytes) -> Ack:
        end = len(body)
        packet_id, pos = read_u16(body, 0, end)
        if packet_id == 0:
            raise MalformedPacket("acknowledgement with packet identifier 0")
        reason: int = Reason.SUCCESS
        props: Properties = _EMPTY
        if self.version == MQTT_5 and pos < end:
            reason = body[pos]
            if pos + 1 < end:
                props, pos = decode_properties(body, pos + 1, end, kind)
        elif pos != end:
            raise MalformedPacket("trailing bytes in acknowledgement")
        return Ack(kind, packet_id, reason, dict(props) if props else {})

    def _subscribe(self, flags: int, body: bytes) -> Subscribe:
        end = len(body)
        packet_id, pos = read_u16(body, 0, end)
        if packet_id == 0:
            raise MalformedPacket("SUBSCRIBE with packet identifier 0")
        props, pos = self._props(body, pos, PacketType.SUBSCRIBE)
        topics: list[tuple[str, SubOptions]] = []
        while pos < end:
            topic, pos = read_utf8(body, pos, end)
            if pos >= end:
                raise MalformedPacket("SUBSCRIBE topic without options")
            opt = body[pos]
            pos += 1
            if self.version == MQTT_5:
                if opt & 0xC0 or (opt >> 4) & 0x03 == 3:
                    raise MalformedPacket("reserved subscription option bits set")
            elif opt & 0xFC:
                raise MalformedPacket("reserved subscription option bits set")
            if opt & 0x03 == 3:
                raise MalformedPacket("subscription QoS 3")
            topics.append(
                (topic, SubOptions(opt & 0x03, bool(opt & 0x04), bool(opt & 0x08), (opt >> 4) & 0x03))
            )
        if not topics:
            raise ProtocolViolation("SUBSCRIBE without topic filters")
        return Subscribe(packet_id, topics, dict(props))

    def _suback(self, flags: int, body: bytes) -> Suback:
        end = len(body)
        packet_id, pos = read_u16(body, 0, end)
        props, pos = self._props(body, pos, PacketType.SUBACK)
        return Suback(packet_id, list(body[pos:]), dict(props))

    def _unsubscribe(self, flags: int, body: bytes) -> Unsubscribe:
        end = len(body)
        packet_id, pos = read_u16(body, 0, end)
        if packet_id == 0:
            raise MalformedPacket("UNSUBSCRIBE with packet identifier 0")
        props, pos = self._props(body, pos, PacketType.UNSUBSCRIBE)
        topics: list[str] = []
        while pos < end:
            topic, pos = read_utf8(body, pos, end)
            topics.append(topic)
        if not topics:
            raise ProtocolViolation("UNSUBSCRIBE without topic filters")
        return Unsubscribe(packet_id, topics, dict(props))

    def _unsuback(self, flags: int, body: bytes) -> Unsuback:
        end = len(body)
        packet_id, pos = read_u16(body, 0, end)
        if self.version != MQTT_5 and pos != end:
            # 3.1.1 UNSUBACK is the packet identifier alone (MQTT-3.11.2): no reason codes.
            raise MalformedPacket("trailing bytes in UNSUBACK")
        props, pos = self._props(body, pos, PacketType.UNSUBACK)
        return Unsuback(packet_id, list(body[pos:]), dict(props))

    def _disconnect(self, flags: int, body: bytes) -> Disconnect:
        if self.version != MQTT_5:
            if body:
                raise MalformedPacket("DISCONNECT with a body in MQTT 3.1.1")
            return Disconnect()
        if not body:
            return Disconnect()
        props: Properties = _EMPTY
        if len(body) > 1:
            props, _ = decode_properties(body, 1, len(body), PacketType.DISCONNECT)
        return Disconnect(body[0], dict(props))

    def _auth(self, flags: int, body: bytes) -> Auth:
        if not body:
            return Auth()
        props: Properties = _EMPTY
        if len(body) > 1:
            props, _ = decode_properties(body, 1, len(body), PacketType.AUTH)
        return Auth(body[0], dict(props))


#: packet type -> decoder, one table for all readers (a table per reader, of bound
#: methods and lambdas, was 2.6 KB of every idle connection)
_DECODERS: dict[int, Callable[[PacketReader, int, bytes], Packet]] = {
    PacketType.CONNECT: PacketReader._connect,
    PacketType.CONNACK: PacketReader._connack,
    PacketType.PUBLISH: PacketReader._publish,
    PacketType.PUBACK: lambda r, f, b: r._ack(PacketType.PUBACK, b),
    PacketType.PUBREC: lambda r, f, b: r._ack(PacketType.PUBREC, b),
    PacketType.PUBREL: lambda r, f, b: r._ack(PacketType.PUBREL, b),
    PacketType.PUBCOMP: lambda r, f, b: r._ack(PacketType.PUBCOMP, b),
    PacketType.SUBSCRIBE: PacketReader._subscribe,
    PacketType.SUBACK: PacketReader._suback,
    PacketType.UNSUBSCRIBE: PacketReader._unsubscribe,
    PacketType.UNSUBACK: PacketReader._unsuback,
    PacketType.PINGREQ: lambda r, f, b: Pingreq(),
    PacketType.PINGRESP: lambda r, f, b: Pingresp(),
    PacketType.DISCONNECT: PacketReader._disconnect,
    PacketType.AUTH: PacketReader._auth,
}
