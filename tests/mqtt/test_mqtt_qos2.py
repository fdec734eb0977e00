"""QoS 2 end to end and DUP re-delivery: exactly one record per QoS 2 PUBLISH (also when
it is re-sent, and across a kill -9 of the bridge mid-flow), PUBREL/PUBCOMP, QoS 2
subscriptions and outbound QoS 2; unacknowledged outbound messages re-sent with the
same packet id and DUP on reconnect, also after a kill -9. Real logserver and bridge
processes; paho-mqtt 3.1.1/5, mosquitto_pub/sub and a raw-socket client.
"""

from __future__ import annotations

import subprocess
import threading

import paho.mqtt.client as paho
import pytest
from helpers.mqtt_kafka import log_records, produce_commands
from helpers.mqtt_procs import HOST, BridgeProcess
from helpers.mqtt_raw import Raw
from helpers.mqtt_sessions import stored_session
from helpers.waiting import wait_until
from kafka import KafkaProducer

from mqtt_bridge.codec import (
    MQTT_5,
    PacketType,
    Publish,
    puback,
)

pytestmark = pytest.mark.timeout(180)


def start_bridge(request, tmp_path, bootstrap: str, *args: str) -> BridgeProcess:
    b = BridgeProcess(bootstrap, tmp_path / "bridge.log", "--log-format", "text", *args)
    request.addfinalizer(b.stop)
    b.start()
    return b


def test_paho_qos2_publishes_land_once_each(request, tmp_path, server) -> None:
    bridge = start_bridge(request, tmp_path, server.bootstrap)
    for version in (paho.MQTTv311, paho.MQTTv5):
        cid = f"q2-{version}"
        c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=cid, protocol=version)
        request.addfinalizer(c.loop_stop)
        c.connect(HOST, bridge.port)
        c.loop_start()
        infos = [c.publish(f"devices/{cid}/telemetry", f"{cid}-{i}".encode(), qos=2) for i in range(30)]
        for info in infos:
            info.wait_for_publish(15)  # PUBCOMP received
            assert info.is_published()
        c.disconnect()
        c.loop_stop()
    values = sorted(r.value for r in log_records(server.bootstrap, "telemetry"))
    assert values == sorted(f"q2-{v}-{i}".encode() for v in (paho.MQTTv311, paho.MQTTv5) for i in range(30))


def test_resent_qos2_publish_is_logged_once_also_across_bridge_kill9(request, tmp_path, server) -> None:
    bridge = start_bridge(request, tmp_path, server.bootstrap)
    topic = "devices/q2raw/telemetry"
    c = Raw(bridge.port)
    c.connect("q2raw", clean=False)
    # the same packet id again before PUBREL: PUBREC again, no second record
    c.publish2(topic, b"first", 9)
    c.expect_ack(PacketType.PUBREC, 9)
    c.publish2(topic, b"first", 9, dup=True)
    c.expect_ack(PacketType.PUBREC, 9)
    c.send(puback(9, PacketType.PUBREL))
    c.expect_ack(PacketType.PUBCOMP, 9)
    # mid-flow: PUBREC received, then the bridge dies before the PUBREL
    c.publish2(topic, b"second", 7)
    c.expect_ack(PacketType.PUBREC, 7)
    c.close()
    bridge.kill9()
    bridge.start()
    c = Raw(bridge.port)
    assert c.connect("q2raw", clean=False).session_present
    c.publish2(topic, b"second", 7, dup=True)  # the client never saw PUBREC: it re-sends
    c.expect_ack(PacketType.PUBREC, 7)
    c.send(puback(7, PacketType.PUBREL))
    c.expect_ack(PacketType.PUBCOMP, 7)
    # released: packet id 7 is free again, a new message with it is a new record
    c.publish2(topic, b"third", 7)
    c.expect_ack(PacketType.PUBREC, 7)
    c.send(puback(7, PacketType.PUBREL))
    c.expect_ack(PacketType.PUBCOMP, 7)
    c.close()
    values = [r.value for r in log_records(server.bootstrap, "telemetry")]
    assert sorted(values) == [b"first", b"second", b"third"]
    assert "already in the log" in bridge.output()


def test_mosquitto_qos2_local_routing_and_granted_qos2(request, tmp_path, server) -> None:
    acl = tmp_path / "acl"
    acl.write_text("topic readwrite chat/#\n")
    bridge = start_bridge(request, tmp_path, server.bootstrap, "--acl-file", str(acl))
    sub = subprocess.Popen(
        ["stdbuf", "-oL", "mosquitto_sub", "-h", HOST, "-p", str(bridge.port), "-t", "chat/q2", "-q", "2", "-C", "3",
         "-d", "-V", "mqttv5"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        out_lines: list[str] = []

        def pump() -> None:
            assert sub.stdout is not None
            for line in sub.stdout:
                out_lines.append(line)

        t = threading.Thread(target=pump, daemon=True)
        t.start()
        wait_until(lambda: any("SUBACK" in line for line in out_lines), what="SUBACK", timeout=20.0)
        pub = subprocess.run(
            ["mosquitto_pub", "-h", HOST, "-p", str(bridge.port), "-t", "chat/q2", "-q", "2", "-d",
             "-V", "mqttv311", "-l"],
            input="m1\nm2\nm3\n", capture_output=True, text=True, timeout=30,
        )
        assert pub.returncode == 0, pub.stderr
        assert pub.stdout.lower().count("received pubcomp") == 3, pub.stdout
        assert sub.wait(20) == 0
        t.join(5)
    finally:
        if sub.poll() is None:
            sub.kill()
            sub.wait()
    text = "".join(out_lines)
    assert "Subscribed (mid: 1): 2" in text, text
    assert text.count("q2") >= 3 and "m3" in text, text
    low = text.lower()
    assert low.count("received publish (d0, q2,") == 3, text  # delivered with QoS 2
    assert low.count("sending pubrec") == 3 and low.count("received pubrel") == 3, text


def test_downlink_qos2_to_a_paho_subscriber(request, tmp_path, server) -> None:
    bridge = start_bridge(request, tmp_path, server.bootstrap,
                          "--downlink", "commands=devices/{key}/commands,qos=2")
    got: list[paho.MQTTMessage] = []
    granted: list[int] = []
    ev = threading.Event()
    c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="q2sub", protocol=paho.MQTTv5)
    c.on_message = lambda cl, u, m: got.append(m)
    c.on_subscribe = lambda cl, u, mid, rcs, props: (granted.extend(r.value for r in rcs), ev.set())
    request.addfinalizer(c.loop_stop)
    c.connect(HOST, bridge.port)
    c.loop_start()
    c.subscribe("devices/q2sub/commands", qos=2)
    assert ev.wait(10)
    assert granted == [2]
    p = KafkaProducer(bootstrap_servers=server.bootstrap)
    for i in range(5):
        p.send("commands", key=b"q2sub", value=f"c{i}".encode())
    p.flush()
    p.close()
    wait_until(lambda: len(got) >= 5, what="5 commands", timeout=20.0)
    c.disconnect()
    c.loop_stop()
    assert [m.payload for m in got] == [f"c{i}".encode() for i in range(5)]
    assert {m.qos for m in got} == {2}


@pytest.mark.parametrize("version", [4, MQTT_5])
def test_unacknowledged_messages_go_out_again_as_dup_with_the_same_packet_id(
    request, tmp_path, server, version: int
) -> None:
    bridge = start_bridge(request, tmp_path, server.bootstrap)
    cid = f"dup-{version}"
    props = {"session_expiry_interval": 3600} if version == MQTT_5 else {}
    c = Raw(bridge.port, version)
    c.connect(cid, clean=False, props=props)
    assert c.subscribe(f"devices/{cid}/commands", 1) == [1]
    produce_commands(server.bootstrap, cid.encode(), [b"a", b"b", b"c"])
    first = [c.packet() for _ in range(3)]
    assert [p.payload for p in first] == [b"a", b"b", b"c"] and not any(p.dup for p in first)
    c.close()  # no PUBACK: the connection just drops
    # same bridge process
    c = Raw(bridge.port, version)
    assert c.connect(cid, clean=False, props=props).session_present
    again = [c.packet() for _ in range(3)]
    assert [(p.payload, p.packet_id, p.dup) for p in again] == [
        (p.payload, p.packet_id, True) for p in first]
    for p in again[:1]:
        c.send(puback(p.packet_id))  # "a" is done; "b" and "c" stay unacknowledged
    wait_until(lambda: sorted(x[0] for x in (stored_session(server.bootstrap, cid) or {})
                              .get("inflight", [])) == sorted(p.packet_id for p in first[1:]), what="the in-flight packet ids saved", timeout=20.0)
    c.close()
    bridge.kill9()
    bridge.start()
    c = Raw(bridge.port, version)
    assert c.connect(cid, clean=False, props=props).session_present
    after = [c.packet() for _ in range(2)]
    assert [(p.payload, p.packet_id, p.dup) for p in after] == [
        (p.payload, p.packet_id, True) for p in first[1:]]
    for p in after:
        c.send(puback(p.packet_id))
    produce_commands(server.bootstrap, cid.encode(), [b"d"])
    nxt = c.packet()
    assert nxt.payload == b"d" and not nxt.dup
    c.close()


def test_logserver_supervised_bridge_kill9_mid_qos2_keeps_session_and_one_record(server_factory) -> None:
    """``logserver --mqtt-bridge``: the bridge child is killed with SIGKILL between PUBREC and
    PUBREL; the restarted child still has the session, its subscription and the packet id."""
    import os
    import re
    import signal

    from helpers.serverproc import free_port

    from commonlib.childproc import can_connect

    port = free_port()
    server = server_factory(extra_args=["--mqtt-bridge", f"{HOST}:{port}"])
    wait_until(lambda: can_connect(port), timeout=30, what="the bridge to listen")

    def pids() -> list[int]:
        return [int(p) for p in re.findall(r"started mqtt-bridge \(pid (\d+)\)", server.output())]

    topic = "devices/sup-dev/telemetry"
    c = Raw(port, MQTT_5)
    c.connect("sup-dev", clean=False, props={"session_expiry_interval": 600})
    assert c.subscribe("devices/sup-dev/commands", 2) == [2]
    c.publish2(topic, b"across-kill", 3)
    c.expect_ack(PacketType.PUBREC, 3)
    wait_until(lambda: "3" in (stored_session(server.bootstrap, "sup-dev") or {}).get("qos2_in", {}), what="the QoS 2 packet id saved", timeout=20.0)
    c.close()
    (victim,) = pids()[-1:]
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: len(pids()) == 2, timeout=30, what="a restarted bridge")
    wait_until(lambda: can_connect(port), timeout=30, what="the restarted bridge to listen")
    c = Raw(port, MQTT_5)
    assert c.connect("sup-dev", clean=False, props={"session_expiry_interval": 600}).session_present
    c.publish2(topic, b"across-kill", 3, dup=True)
    c.expect_ack(PacketType.PUBREC, 3)
    c.send(puback(3, PacketType.PUBREL))
    c.expect_ack(PacketType.PUBCOMP, 3)
    produce_commands(server.bootstrap, b"sup-dev", [b"cmd"])
    p = c.packet()
    assert isinstance(p, Publish) and p.payload == b"cmd" and p.qos == 1  # downlink rule qos=1
    c.send(puback(p.packet_id))
    c.close()
    assert [r.value for r in log_records(server.bootstrap, "telemetry")] == [b"across-kill"]
