"""Hostile strings from devices, against a real bridge: invalid UTF-8 (bytes, an encoded
surrogate, an overlong form) in a client id or a topic closes that connection as a
malformed packet and writes nothing; wildcards in a client id never widen an ACL pattern
rule (paho-mqtt 5). Raw sockets build what well-behaved clients refuse to send."""

from __future__ import annotations

import socket
import struct
import uuid

import paho.mqtt.client as paho
import pytest
from helpers.clienthelpers import kp_end_offsets
from helpers.mqtt_procs import HOST, BridgeProcess
from helpers.waiting import wait_until

from mqtt_bridge.codec import Connect, Publish, encode

pytestmark = pytest.mark.timeout(120)

BAD_UTF8 = [b"\xff\xfe", b"\xed\xa0\x80", b"\xc0\xaf"]  # not UTF-8, a surrogate, overlong "/"


@pytest.fixture
def bridge(request, server, tmp_path) -> BridgeProcess:
    acl = tmp_path / "acl"
    acl.write_text("pattern read devices/%c/commands\npattern write devices/%c/#\n")
    b = BridgeProcess(server.bootstrap, tmp_path / "bridge.log", "--log-format", "text",
                      "--acl-file", str(acl))
    request.addfinalizer(b.stop)
    b.start()
    return b


def _string(raw: bytes) -> bytes:
    return struct.pack(">H", len(raw)) + raw


def _connect_packet(client_id: bytes, version: int) -> bytes:
    """CONNECT with a raw client id (the codec would refuse to encode a bad one)."""
    name = b"MQTT"
    body = _string(name) + bytes([version, 0x02]) + struct.pack(">H", 30)
    if version == 5:
        body += b"\x00"  # no properties
    body += _string(client_id)
    return bytes([0x10, len(body)]) + body


def _closed_without_connack_success(sock: socket.socket) -> bytes:
    """Everything the bridge sent before closing (a refusal CONNACK at most)."""
    sock.settimeout(30)
    data = b""
    while True:
        chunk = sock.recv(4096)
        if not chunk:
            return data
        data += chunk


@pytest.mark.parametrize("version", [4, 5])
@pytest.mark.parametrize("bad", BAD_UTF8, ids=["bytes", "surrogate", "overlong"])
def test_a_client_id_that_is_not_utf8_is_malformed(bridge, version, bad):
    with socket.create_connection((HOST, bridge.port), timeout=30) as sock:
        sock.sendall(_connect_packet(b"dev-" + bad, version))
        sent = _closed_without_connack_success(sock)
    # 3.1.1 closes at once; v5 may say why first (CONNACK 0x81 malformed packet)
    assert sent in (b"", b"\x20\x03\x00\x81\x00"), sent
    assert "string is not valid UTF-8 (reason 0x81)" in bridge.output()
    _a_good_client_still_connects(bridge)


@pytest.mark.parametrize("bad", BAD_UTF8, ids=["bytes", "surrogate", "overlong"])
def test_a_topic_that_is_not_utf8_closes_the_connection_and_writes_nothing(bridge, server, bad):
    cid = "dev-" + uuid.uuid4().hex[:6]
    before = kp_end_offsets(server.bootstrap, "telemetry") if _exists(server, "telemetry") else {}
    with socket.create_connection((HOST, bridge.port), timeout=30) as sock:
        sock.sendall(encode(Connect(cid, 5, True, 30, None, None, None, {}), 5))
        assert sock.recv(5)[:1] == b"\x20"  # CONNACK
        topic = f"devices/{cid}/telemetry".encode() + bad
        good = encode(Publish(f"devices/{cid}/telemetry", b"x", 1, False, False, 7, {}), 5)
        # the same PUBLISH with the topic's bytes swapped for the bad ones
        body = _string(topic) + good[2 + 2 + len(f"devices/{cid}/telemetry"):]
        sock.sendall(bytes([0x32, len(body)]) + body)
        sent = _closed_without_connack_success(sock)
    assert not sent.startswith(b"\x40"), "the bad PUBLISH was acknowledged"
    after = kp_end_offsets(server.bootstrap, "telemetry") if _exists(server, "telemetry") else {}
    assert after == before
    _a_good_client_still_connects(bridge)


def test_wildcards_in_a_client_id_do_not_widen_an_acl_pattern(bridge):
    for cid in ("+", "#", "a/+"):
        client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=cid, protocol=paho.MQTTv5)
        granted: list[int] = []
        client.on_subscribe = lambda c, u, mid, codes, props, g=granted: g.extend(r.value for r in codes)
        client.connect(HOST, bridge.port)
        client.loop_start()
        try:
            client.subscribe("devices/+/commands", qos=1)
            wait_until(lambda g=granted: g, 30, "the SUBACK")
        finally:
            client.disconnect()
            client.loop_stop()
        assert granted == [0x87], (cid, granted)


def _exists(server, topic: str) -> bool:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap)
    try:
        return topic in consumer.topics()
    finally:
        consumer.close()


def _a_good_client_still_connects(bridge: BridgeProcess) -> None:
    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="well-behaved",
                         protocol=paho.MQTTv5)
    result: list[int] = []
    client.on_connect = lambda c, u, flags, reason, props: result.append(reason.value)
    client.connect(HOST, bridge.port)
    client.loop_start()
    try:
        wait_until(lambda: result, 30, "the well-behaved client's CONNACK")
    finally:
        client.disconnect()
        client.loop_stop()
    assert result == [0]
