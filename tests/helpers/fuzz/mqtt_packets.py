"""Fuzz target: the MQTT decoder of the bridge (mqtt_bridge/codec), as a connection feeds it.

Input: one flags byte (which side reads: the server's reader, learning the version from
CONNECT, or a client's reader told 3.1.1 or 5.0), one chunk-size byte, then the byte
stream. Properties:

- feeding returns packets or raises MqttError (MalformedPacket, ProtocolViolation,
  PacketTooLarge), never anything else; the topic checks raise only TopicError;
- the reader is incremental: the stream fed in chunks yields the same packets and the
  same error (class and reason code) as fed whole;
- memory stays bounded: the reader never buffers more than max_packet_size bytes;
- every decoded packet re-encodes and decodes to an equal packet (except the 3.1.1
  CONNACK/SUBACK, whose codes the encoder maps to 3.1.1's on purpose).
"""

from __future__ import annotations

from collections.abc import Iterator

from mqtt_bridge.codec import (
    MQTT_5,
    MQTT_31,
    MQTT_311,
    Ack,
    Auth,
    Connack,
    Connect,
    Disconnect,
    MqttError,
    Packet,
    PacketReader,
    PacketType,
    Pingreq,
    Pingresp,
    Publish,
    Reason,
    Suback,
    SubOptions,
    Subscribe,
    TopicError,
    Unsuback,
    Unsubscribe,
    Will,
    encode,
    topic_matches,
    validate_filter,
    validate_topic,
)

PACKAGES = ("mqtt_bridge.codec",)
MAX_PACKET_SIZE = 2048
#: Reader kinds selected by the low two bits of the flags byte (0: the server's reader).
_VERSIONS = (0, MQTT_311, MQTT_5, 0)

_PROPS = {"user_property": [("k", "v"), ("k", "w")], "content_type": "text/plain",
          "message_expiry_interval": 60, "correlation_data": b"\x00\x01",
          "response_topic": "devices/d1/replies", "payload_format_indicator": 1}


def _client_packets(v: int) -> list[Packet]:
    props = _PROPS if v == MQTT_5 else {}
    return [
        Publish("devices/d1/telemetry", b'{"t": 21.5}', 0),
        Publish("devices/d1/telemetry", b"\x00" * 40, 1, retain=True, packet_id=7, properties=props),
        Publish("d/é", b"x", 2, dup=True, packet_id=65535),
        Subscribe(1, [("devices/d1/commands", SubOptions(1)), ("ota/#", SubOptions(0))],
                  {"subscription_identifier": 5} if v == MQTT_5 else {}),
        Subscribe(2, [("$share/g/devices/+/x", SubOptions(2, True, True, 1) if v == MQTT_5
                       else SubOptions(2))]),
        Unsubscribe(3, ["ota/#", "a/+/b"]),
        Ack(PacketType.PUBACK, 7), Ack(PacketType.PUBREC, 8), Ack(PacketType.PUBREL, 8),
        Ack(PacketType.PUBCOMP, 8),
        *([Ack(PacketType.PUBACK, 9, Reason.QUOTA_EXCEEDED, {"reason_string": "no"}),
           Auth(0x18, {"authentication_method": "SCRAM"})] if v == MQTT_5 else []),
        Pingreq(),
        Disconnect(Reason.DISCONNECT_WITH_WILL, {"session_expiry_interval": 0})
        if v == MQTT_5 else Disconnect(),
    ]


def _connects() -> Iterator[Connect]:
    yield Connect("dev-1", MQTT_311)
    yield Connect("dev-2", MQTT_31, clean_start=False, keep_alive=0)
    yield Connect("dev-3", MQTT_311, username="u", password=b"p",
                  will=Will("devices/dev-3/status", b"offline", 1, True))
    yield Connect("dev-4", MQTT_5, username="u", password=b"secret",
                  will=Will("w", b"gone", 2, False, {"will_delay_interval": 5}),
                  properties={"session_expiry_interval": 3600, "receive_maximum": 10,
                              "maximum_packet_size": 4096, "topic_alias_maximum": 3,
                              "authentication_method": "PLAIN", "authentication_data": b"ab",
                              "user_property": [("a", "b")]})
    yield Connect("", MQTT_5, password=b"only-password")


def seeds() -> Iterator[bytes]:
    for connect in _connects():
        v = connect.protocol_level
        stream = encode(connect, v) + b"".join(encode(p, v) for p in _client_packets(v))
        for chunk in (0, 1, 7):
            yield bytes([0, chunk]) + stream
    for v, kind in ((MQTT_311, 1), (MQTT_5, 2)):
        server = [
            Connack(False, Reason.SUCCESS, {"assigned_client_identifier": "auto-1",
                                            "server_keep_alive": 30} if v == MQTT_5 else {}),
            Suback(1, [0, 1, 0x80]), Unsuback(3, [0, 0x11] if v == MQTT_5 else []),
            Publish("devices/d1/commands", b"reboot", 1, packet_id=4), Pingresp(),
            Ack(PacketType.PUBACK, 7),
        ]
        yield bytes([kind, 3]) + b"".join(encode(p, v) for p in server)


def _consume(reader: PacketReader, chunks: list[bytes]) -> tuple[list[Packet], MqttError | None]:
    packets: list[Packet] = []
    error: MqttError | None = None
    for chunk in chunks:
        try:
            packets += reader.feed(chunk)
        except MqttError as exc:
            error = exc
            break
        assert reader.buffered <= MAX_PACKET_SIZE, f"reader buffers {reader.buffered} bytes"
    if error is None and reader.error is not None:
        error = reader.error
    return packets, error


def _signature(error: MqttError | None) -> tuple[str, int] | None:
    return None if error is None else (type(error).__name__, int(error.reason))


def _roundtrip(packets: list[Packet], version: int) -> None:
    v = version
    for packet in packets:
        if isinstance(packet, Connect):
            v = packet.protocol_level
            again = PacketReader(MAX_PACKET_SIZE + 8).feed(encode(packet, v))
        else:
            if v != MQTT_5 and isinstance(packet, Connack | Suback):
                continue  # 3.1.1 return codes are a lossy mapping of the 5.0 reasons
            again = PacketReader(MAX_PACKET_SIZE + 8, version=v).feed(encode(packet, v))
        assert again == [packet], f"v{v} round trip: {packet!r} -> {again!r}"


def _topics(packets: list[Packet]) -> None:
    for packet in packets:
        names: list[str] = []
        filters: list[str] = []
        if isinstance(packet, Publish):
            names.append(packet.topic)
        elif isinstance(packet, Subscribe):
            filters += [t for t, _ in packet.topics]
        elif isinstance(packet, Unsubscribe):
            filters += packet.topics
        elif isinstance(packet, Connect) and packet.will is not None:
            names.append(packet.will.topic)
        for name in names:
            try:
                validate_topic(name)
            except TopicError:
                continue
        for topic_filter in filters:
            try:
                validate_filter(topic_filter)
            except TopicError:
                continue
            for name in names or ["devices/d1/commands"]:
                assert isinstance(topic_matches(topic_filter, name), bool)


def test_one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    version = _VERSIONS[data[0] & 3]
    size = data[1] or len(data)
    stream = data[2:]
    whole, whole_error = _consume(PacketReader(MAX_PACKET_SIZE, version), [stream])
    chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
    pieces, pieces_error = _consume(PacketReader(MAX_PACKET_SIZE, version), chunks)
    assert pieces == whole, f"chunked decode differs: {pieces!r} != {whole!r}"
    assert _signature(pieces_error) == _signature(whole_error), (pieces_error, whole_error)
    _topics(whole)
    _roundtrip(whole, version)


if __name__ == "__main__":
    from helpers.fuzz.common import main

    main(seeds, test_one_input, PACKAGES)
