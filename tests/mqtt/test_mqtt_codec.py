"""Unit tests of the bridge's pure parts: MQTT codec, topic rules, murmur2, mapping."""

from __future__ import annotations

import pytest
from kafka.partitioner.default import murmur2 as kp_murmur2

from kafkaproto.murmur2 import murmur2, partition_for
from mqtt_bridge.codec import (
    MQTT_5,
    Ack,
    Connect,
    MalformedPacket,
    MqttError,
    PacketReader,
    PacketTooLarge,
    PacketType,
    Publish,
    Reason,
    SubOptions,
    Subscribe,
    Will,
    encode,
    publish_parts,
    topic_matches,
    validate_filter,
)
from mqtt_bridge.codec.topics import TopicError, filters_overlap
from mqtt_bridge.mapping import DEFAULT_DOWNLINK, DEFAULT_UPLINK, Mapping, RuleError, UplinkRule
from mqtt_bridge.subscriptions import SubscriptionIndex


@pytest.mark.parametrize("version", [4, 5])
def test_roundtrip_client_packets(version: int) -> None:
    will = Will("w/t", b"bye", 1, True, {"will_delay_interval": 3} if version == 5 else {})
    connect = Connect("dev-1", version, False, 30, "u", b"p", will,
                      {"session_expiry_interval": 60} if version == 5 else {})
    props = {"user_property": [("a", "1"), ("a", "2")]} if version == 5 else {}
    packets = [
        connect,
        Publish("devices/x/t", b"\x00\x01" * 100, 1, False, False, 7, props),
        Subscribe(3, [("a/+/c", SubOptions(1)), ("#", SubOptions(0))]),
    ]
    data = b"".join(encode(p, version) for p in packets)
    reader = PacketReader()
    out = []
    for i in range(0, len(data), 7):  # arbitrary fragmentation
        out += reader.feed(data[i : i + 7])
    assert out[0] == connect
    assert out[1].payload == packets[1].payload and out[1].packet_id == 7
    assert dict(out[1].properties) == props
    assert [t for t, _ in out[2].topics] == ["a/+/c", "#"]


def test_publish_parts_share_tail() -> None:
    head, tail = publish_parts("ota", b"x" * 1000, 1, False, MQTT_5, {"content_type": "a"})
    packet = head + b"\x00\x09" + tail
    reader = PacketReader(version=MQTT_5)
    (p,) = reader.feed(packet)
    assert p.packet_id == 9 and p.payload == b"x" * 1000 and p.properties["content_type"] == "a"


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"\x00\x00", Reason.MALFORMED_PACKET),  # reserved type 0
        (b"\x10\xff\xff\xff\xff\x7f", Reason.MALFORMED_PACKET),  # 5-byte remaining length
        (b"\x10\x0c\x00\x04MQTT\x07\x02\x00\x3c\x00\x00", Reason.UNSUPPORTED_PROTOCOL_VERSION),
        (b"\x10\x0c\x00\x04XXXX\x04\x02\x00\x3c\x00\x00", Reason.UNSUPPORTED_PROTOCOL_VERSION),
        (b"\x10\x0c\x00\x04MQTT\x04\x03\x00\x3c\x00\x00", Reason.MALFORMED_PACKET),  # reserved flag
        (b"\x30\x03\x00\x01a", Reason.PROTOCOL_ERROR),  # PUBLISH before CONNECT
    ],
)
def test_bad_input_reasons(data: bytes, reason: Reason) -> None:
    with pytest.raises(MqttError) as info:
        PacketReader().feed(data)
    assert info.value.reason == reason


def test_oversized_rejected_before_body_arrives() -> None:
    reader = PacketReader(max_packet_size=1000)
    with pytest.raises(PacketTooLarge):
        reader.feed(b"\x30\xff\x7f")  # announces 16383 bytes


def test_malformed_publish() -> None:
    reader = PacketReader(version=4)
    with pytest.raises(MalformedPacket):
        reader.feed(b"\x36\x05\x00\x01a\x00\x01")  # QoS 3
    with pytest.raises(MalformedPacket):
        PacketReader(version=4).feed(b"\x32\x05\x00\x01a\x00\x00")  # packet id 0


def test_acks() -> None:
    (a,) = PacketReader(version=5).feed(encode(Ack(PacketType.PUBACK, 5, Reason.QUOTA_EXCEEDED), 5))
    assert a.packet_id == 5 and a.reason == Reason.QUOTA_EXCEEDED


def test_topic_rules() -> None:
    assert topic_matches("a/+/c", "a/b/c")
    assert topic_matches("a/#", "a")
    assert topic_matches("#", "a/b")
    assert not topic_matches("#", "$SYS/x")
    assert not topic_matches("a/+", "a/b/c")
    for bad in ("a/#/b", "a/b#", "a+/b", "", "$share/g", "$share//a"):
        with pytest.raises(TopicError):
            validate_filter(bad)
    validate_filter("$share/g/devices/+/x")
    assert filters_overlap("devices/d1/commands", "devices/+/commands")
    assert filters_overlap("#", "ota")
    assert not filters_overlap("devices/d1/telemetry", "devices/+/commands")


@pytest.mark.parametrize(
    "key, expected",
    [(b"21", -973932308), (b"foobar", -790332482), (b"a-little-bit-long-string", -985981536),
     (b"a-little-bit-longer-string", -1486304829), (b"abc", 479470107), (b"", 275646681)],
)
def test_murmur2_matches_java(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_partition_matches_kafka_python() -> None:
    for i in range(2000):
        key = f"device-{i}".encode()
        assert partition_for(key, 7) == (kp_murmur2(key) & 0x7FFFFFFF) % 7


def test_mapping() -> None:
    m = Mapping.parse(DEFAULT_UPLINK, DEFAULT_DOWNLINK)
    assert m.route_up("devices/d9/telemetry") == ("telemetry", b"d9")
    assert m.route_up("devices//telemetry") is None
    assert m.route_up("other/x") is None
    assert m.by_kafka_topic["commands"].topic_for(b"d9") == "devices/d9/commands"
    assert m.by_kafka_topic["commands"].topic_for(b"a/b") is None
    with pytest.raises(RuleError):
        UplinkRule.parse("devices/{id}/x={stream}")


def test_subscription_index_shared_and_wildcards() -> None:
    class S:
        online = True

    a, b, c = S(), S(), S()
    idx = SubscriptionIndex()
    idx.add(a, "devices/+/commands", SubOptions(1))
    idx.add(b, "devices/#", SubOptions(0))
    idx.add(c, "$share/g/devices/d1/commands", SubOptions(1))
    got = idx.match("devices/d1/commands")
    assert set(got) == {a, b, c}
    plain, shared = idx.match_copies("devices/d1/commands")
    assert set(plain) == {a, b} and [s for s, _o, _n in shared] == [c]  # a copy of its own
    assert idx.remove(a, "devices/+/commands")
    assert set(idx.match("devices/d2/commands")) == {b}
    # c's own non-shared subscription: the shared pick is a second copy (MQTT 5 4.8.2)
    idx.add(c, "devices/d1/#", SubOptions(0))
    first, again = idx.match_copies("devices/d1/commands")
    assert set(first) == {b, c} and first[c] == SubOptions(0)
    assert again == [(c, SubOptions(1), "$share/g/devices/d1/commands")]
    assert idx.match_copies("devices/d2/commands") == ({b: SubOptions(0)}, ())
