"""kill -9 of the log server (the bridge stays up) in the middle of QoS 1 and QoS 2 flows,
uplink and downlink: every message is in the log, and reaches its subscriber, exactly once.

Real processes: logserver (killed with SIGKILL and started again on the same port and data
directory), mqtt-bridge; paho-mqtt 5 and 3.1.1 devices with persistent sessions publishing
QoS 1 and QoS 2, a paho 5 subscriber of QoS 2 commands; kafka-python on the log side.
"""

from __future__ import annotations

import threading
import time

import paho.mqtt.client as paho
import pytest
from helpers.mqtt_kafka import log_records, produce_commands
from helpers.mqtt_procs import HOST, BridgeProcess
from helpers.mqtt_raw import Raw
from helpers.waiting import wait_until
from kafka import KafkaProducer
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

pytestmark = pytest.mark.timeout(300)

N = 300  # messages per publishing device


class Device:
    """A paho device with a persistent session that publishes ``N`` messages in a thread."""

    def __init__(self, request, port: int, cid: str, version: int, qos: int, stream: str) -> None:
        self.cid, self.qos, self.stream = cid, qos, stream
        self.version = version
        self.infos: list[paho.MQTTMessageInfo] = []
        self.got: list[paho.MQTTMessage] = []
        self.connects = 0
        self.connected = threading.Event()
        kw = {"clean_session": False} if version == paho.MQTTv311 else {}
        self.c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=cid, protocol=version, **kw)
        self.c.max_inflight_messages_set(20)
        self.c.max_queued_messages_set(0)
        self.c.reconnect_delay_set(0.1, 1)
        self.c.on_message = lambda c, u, m: self.got.append(m)
        #: packet ids paho saw acknowledged (PUBACK / PUBCOMP); a PUBLISH made while the
        #: connection is down is kept by paho and sent after the reconnect
        self.acked: set[int] = set()
        self.c.on_publish = lambda c, u, mid, rc, props: self.acked.add(mid)

        def on_connect(c, u, flags, rc, props) -> None:
            self.connects += 1
            self.connected.set()

        self.c.on_connect = on_connect
        request.addfinalizer(self.c.loop_stop)
        props = None
        if version == paho.MQTTv5:
            props = Properties(PacketTypes.CONNECT)
            props.SessionExpiryInterval = 600
            self.c.connect(HOST, port, clean_start=False, properties=props)
        else:
            self.c.connect(HOST, port)
        self.c.loop_start()
        assert self.connected.wait(10), f"{cid}: no CONNACK"

    def payloads(self) -> list[bytes]:
        return [f"{self.cid}-{i}".encode() for i in range(N)]

    def publish_all(self) -> None:
        for p in self.payloads():
            self.infos.append(self.c.publish(f"devices/{self.cid}/{self.stream}", p, qos=self.qos))
            time.sleep(0.004)

    def all_published(self) -> bool:
        return len(self.infos) == N and all(i.mid in self.acked for i in self.infos)


def test_log_server_kill9_mid_qos1_and_qos2_flows_loses_and_duplicates_nothing(request, tmp_path, server) -> None:
    bridge = BridgeProcess(server.bootstrap, tmp_path / "bridge.log", "--log-format", "text",
                           "--delivery-timeout-s", "120", "--uplink-topic", "rs1", "--uplink-topic", "rs2",
                           "--downlink", "commands=devices/{key}/commands,qos=2")
    request.addfinalizer(bridge.stop)
    bridge.start()
    publishers = [
        Device(request, bridge.port, "q1v5", paho.MQTTv5, 1, "rs1"),
        Device(request, bridge.port, "q1v3", paho.MQTTv311, 1, "rs1"),
        Device(request, bridge.port, "q2v5", paho.MQTTv5, 2, "rs2"),
        Device(request, bridge.port, "q2v3", paho.MQTTv311, 2, "rs2"),
    ]
    sub = Device(request, bridge.port, "cmdsub", paho.MQTTv5, 2, "")
    subscribed = threading.Event()
    sub.c.on_subscribe = lambda *a: subscribed.set()
    sub.c.subscribe("devices/cmdsub/commands", qos=2)
    assert subscribed.wait(10)
    commands = [f"cmd-{i}".encode() for i in range(200)]
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, acks="all")
    request.addfinalizer(producer.close)
    for v in commands[:100]:
        producer.send("commands", key=b"cmdsub", value=v)
    producer.flush()

    threads = [threading.Thread(target=d.publish_all, daemon=True) for d in publishers]
    for t in threads:
        t.start()
    wait_until(lambda: all(len(d.infos) >= N // 4 for d in publishers), what="the flows to be under way", timeout=20.0)
    server.kill9()
    killed_at = time.monotonic()
    wait_until(lambda: time.monotonic() - killed_at > 1.5, what="the log server to stay dead a while", timeout=20.0)
    server.start()
    for t in threads:
        t.join(60)
    wait_until(lambda: all(d.all_published() for d in publishers), timeout=120, what="every PUBLISH acknowledged (PUBACK / PUBCOMP)")
    producer.close()  # its connection died with the server: a new one
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, acks="all")
    request.addfinalizer(producer.close)
    for v in commands[100:]:
        producer.send("commands", key=b"cmdsub", value=v)
    producer.flush()
    producer.send("commands", key=b"cmdsub", value=b"end")  # nothing may come after it
    producer.flush()
    wait_until(lambda: any(m.payload == b"end" for m in sub.got), timeout=60, what="every command at the subscriber")

    for topic, devs in (("rs1", publishers[:2]), ("rs2", publishers[2:])):
        records = log_records(server.bootstrap, topic)
        for d in devs:
            mine = [r.value for r in records if r.key == d.cid.encode()]
            assert sorted(mine) == sorted(d.payloads()), (
                f"{d.cid}: {len(mine)} records for {N} messages; "
                f"missing {len(set(d.payloads()) - set(mine))}, duplicates {len(mine) - len(set(mine))}")
    # the subscriber: every command once, in order, at QoS 2
    assert [m.payload for m in sub.got] == [*commands, b"end"]
    assert {m.qos for m in sub.got} == {2}
    assert sum(d.connects for d in publishers) >= len(publishers)
    for d in [*publishers, sub]:
        d.c.disconnect()
        d.c.loop_stop()


def test_bridge_kill9_mid_qos1_and_qos2_flows(request, tmp_path, server) -> None:
    """kill -9 of the bridge itself mid-flow, the same devices reconnecting (persistent
    sessions, paho re-sends what was not acknowledged): nothing is lost; QoS 2 is in the log
    exactly once; QoS 1 is at least once (MQTT 4.3.2: a PUBLISH written but not yet
    PUBACKed when the bridge died comes again with DUP and is written again), so its
    duplicates are at most what one device can have in flight."""
    bridge = BridgeProcess(server.bootstrap, tmp_path / "bridge.log", "--log-format", "text",
                           "--uplink-topic", "rs1", "--uplink-topic", "rs2")
    request.addfinalizer(bridge.stop)
    bridge.start()
    publishers = [
        Device(request, bridge.port, "b1v5", paho.MQTTv5, 1, "rs1"),
        Device(request, bridge.port, "b1v3", paho.MQTTv311, 1, "rs1"),
        Device(request, bridge.port, "b2v5", paho.MQTTv5, 2, "rs2"),
        Device(request, bridge.port, "b2v3", paho.MQTTv311, 2, "rs2"),
    ]
    threads = [threading.Thread(target=d.publish_all, daemon=True) for d in publishers]
    for t in threads:
        t.start()
    wait_until(lambda: all(len(d.infos) >= N // 4 for d in publishers), what="the flows to be under way", timeout=20.0)
    bridge.kill9()
    assert not all(d.all_published() for d in publishers)
    bridge.start()
    for t in threads:
        t.join(60)
    wait_until(lambda: all(d.all_published() for d in publishers), timeout=120, what="every PUBLISH acknowledged after the restart")
    assert all(d.connects >= 2 for d in publishers)  # each reconnected to the new bridge
    for topic, devs in (("rs1", publishers[:2]), ("rs2", publishers[2:])):
        records = log_records(server.bootstrap, topic)
        for d in devs:
            mine = [r.value for r in records if r.key == d.cid.encode()]
            assert set(mine) == set(d.payloads()), f"{d.cid}: {len(set(d.payloads()) - set(mine))} lost"
            duplicates = len(mine) - len(set(mine))
            if d.qos == 2:
                assert duplicates == 0, f"{d.cid}: {duplicates} QoS 2 messages twice in the log"
            else:
                assert duplicates <= 20, f"{d.cid}: {duplicates} duplicates, more than its window of 20"
    for d in publishers:
        d.c.disconnect()
        d.c.loop_stop()


def test_bridge_kill9_after_outbound_qos2_completed_does_not_send_it_again(request, tmp_path, server) -> None:
    """Outbound QoS 2 to a persistent session: the PUBREL goes only once the session (its
    resume offset past the message) is saved, so a bridge killed right after PUBCOMP
    re-sends at most that PUBREL, never the PUBLISH (which the client would take as new)."""

    from mqtt_bridge.codec import MQTT_5, Ack, PacketType, Publish, puback

    bridge = BridgeProcess(server.bootstrap, tmp_path / "bridge.log", "--log-format", "text",
                           "--downlink", "commands=devices/{key}/commands,qos=2",
                           "--session-commit-interval-s", "600")  # no periodic save in this test
    request.addfinalizer(bridge.stop)
    bridge.start()
    props = {"session_expiry_interval": 600}
    c = Raw(bridge.port, MQTT_5)
    c.connect("q2down", clean=False, props=props)
    assert c.subscribe("devices/q2down/commands", 2) == [2]
    c.close()  # the disconnect saves the session with its subscription
    wait_until(lambda: "client q2down disconnected" in bridge.output(), what="the disconnect", timeout=20.0)
    c = Raw(bridge.port, MQTT_5)
    assert c.connect("q2down", clean=False, props=props).session_present
    produce_commands(server.bootstrap, b"q2down", [b"c1"])
    p = c.packet()
    assert isinstance(p, Publish) and p.payload == b"c1" and p.qos == 2
    c.send(puback(p.packet_id, PacketType.PUBREC))
    c.expect_ack(PacketType.PUBREL, p.packet_id)
    c.send(puback(p.packet_id, PacketType.PUBCOMP))
    c.close()
    bridge.kill9()
    bridge.start()
    c = Raw(bridge.port, MQTT_5)
    assert c.connect("q2down", clean=False, props=props).session_present
    produce_commands(server.bootstrap, b"q2down", [b"c2"])
    seen = []
    while True:
        q = c.packet()
        seen.append(q)
        if isinstance(q, Ack) and q.kind == PacketType.PUBREL:
            c.send(puback(q.packet_id, PacketType.PUBCOMP))  # the released id again: fine
        if isinstance(q, Publish):
            break
    assert isinstance(q, Publish) and q.payload == b"c2", [getattr(x, "payload", x) for x in seen]
    c.close()
