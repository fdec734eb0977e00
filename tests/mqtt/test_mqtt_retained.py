"""Retained messages in a compacted topic of the log: they survive a kill -9 of the
bridge, an empty retained PUBLISH deletes (tombstone), v5 properties come back, and two
bridges in front of one log share them. Real logserver and bridge processes,
mosquitto_pub/sub and paho-mqtt 5, kafka-python to look at the topic.
"""

from __future__ import annotations

import subprocess
import threading

import paho.mqtt.client as paho
import pytest
from helpers.mqtt_procs import HOST, mosquitto_pub
from helpers.mqtt_retained import Subscriber, retained_in_log, start_acl_bridge
from helpers.waiting import wait_until
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

pytestmark = pytest.mark.timeout(180)


def test_retained_messages_survive_kill9_and_empty_payload_deletes(request, tmp_path, server) -> None:
    bridge = start_acl_bridge(request, tmp_path, server.bootstrap)
    mosquitto_pub(bridge.port, "-t", "chat/r1", "-m", "one", "-r", "-q", "1")
    mosquitto_pub(bridge.port, "-t", "chat/r2", "-m", "two", "-r", "-q", "1")
    props = Properties(PacketTypes.PUBLISH)
    props.UserProperty = [("site", "berlin")]
    props.CorrelationData = b"\x00\x01corr"
    props.ContentType = "text/plain"
    c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="pub5", protocol=paho.MQTTv5)
    request.addfinalizer(c.loop_stop)
    c.connect(HOST, bridge.port)
    c.loop_start()
    c.publish("chat/r3", b"three", qos=1, retain=True, properties=props).wait_for_publish(10)
    c.disconnect()
    c.loop_stop()
    wait_until(lambda: retained_in_log(server.bootstrap).keys() >= {b"chat/r1", b"chat/r2", b"chat/r3"}, what="the retained messages in the compacted topic", timeout=20.0)
    bridge.kill9()
    bridge.start()

    got = Subscriber(bridge.port, request).until_marker(bridge.port)
    by_topic = {m.topic: m for m in got}
    assert sorted(by_topic) == ["chat/r1", "chat/r2", "chat/r3"]
    assert all(m.retain for m in got)
    assert by_topic["chat/r1"].payload == b"one"
    r3 = by_topic["chat/r3"]
    assert r3.payload == b"three"
    assert r3.properties.UserProperty == [("site", "berlin")]
    assert r3.properties.CorrelationData == b"\x00\x01corr"
    assert r3.properties.ContentType == "text/plain"

    mosquitto_pub(bridge.port, "-t", "chat/r1", "-n", "-r", "-q", "1")  # delete
    wait_until(lambda: retained_in_log(server.bootstrap).get(b"chat/r1", b"") is None, what="the tombstone", timeout=20.0)
    assert bridge.stop() == 0
    bridge.start()
    got = Subscriber(bridge.port, request).until_marker(bridge.port)
    assert sorted(m.topic for m in got) == ["chat/r2", "chat/r3"]


def test_two_bridges_share_retained_messages(request, tmp_path, server) -> None:
    a = start_acl_bridge(request, tmp_path, server.bootstrap, "bridge-a")
    b = start_acl_bridge(request, tmp_path, server.bootstrap, "bridge-b")
    mosquitto_pub(a.port, "-t", "chat/shared", "-m", "from-a", "-r", "-q", "1")
    # bridge b learns it from the log: subscribe (fresh each time) until it is there
    def b_has_it() -> bool:
        r = subprocess.run(
            ["mosquitto_sub", "-h", HOST, "-p", str(b.port), "-t", "chat/shared", "-C", "1", "-W", "2",
             "-v"], capture_output=True, text=True, timeout=30,
        )
        return r.stdout.strip() == "chat/shared from-a"

    wait_until(b_has_it, timeout=30, what="the retained message on the other bridge")


def test_retained_messages_keep_their_qos_also_after_kill9(request, tmp_path, server) -> None:
    """MQTT 5 3.3.1.3 / 3.1.1 3.3.1.3: a retained message goes to a new subscriber at the
    lower of its own QoS and the subscription's (stored with it in the log: after a kill -9
    too)."""
    bridge = start_acl_bridge(request, tmp_path, server.bootstrap)
    for q in ("0", "1", "2"):
        mosquitto_pub(bridge.port, "-t", f"chat/qos/{q}", "-m", q, "-r", "-q", q)

    def retained_qos(sub_qos: int) -> dict[str, int]:
        got: list[paho.MQTTMessage] = []
        ev = threading.Event()
        c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="", protocol=paho.MQTTv311)
        c.on_message = lambda c, u, m: got.append(m)
        c.on_subscribe = lambda *a: ev.set()
        request.addfinalizer(c.loop_stop)
        c.connect(HOST, bridge.port)
        c.loop_start()
        c.subscribe("chat/qos/+", qos=sub_qos)
        assert ev.wait(10)
        wait_until(lambda: len(got) == 3, what="three retained messages", timeout=20.0)
        c.disconnect()
        c.loop_stop()
        assert all(m.retain for m in got)
        return {m.topic: m.qos for m in got}

    assert retained_qos(2) == {"chat/qos/0": 0, "chat/qos/1": 1, "chat/qos/2": 2}
    assert retained_qos(1) == {"chat/qos/0": 0, "chat/qos/1": 1, "chat/qos/2": 1}
    bridge.kill9()
    bridge.start()
    assert retained_qos(2) == {"chat/qos/0": 0, "chat/qos/1": 1, "chat/qos/2": 2}
