"""Several bridges in front of one log: a device that moves to another bridge resumes its
persistent session there and its old connection is closed (session taken over).
Each runs against one logserver and against a 3-broker cluster (``log_bootstrap``).
Real logserver and two or three bridge processes, paho-mqtt 5 devices, kafka-python.
"""

from __future__ import annotations

import threading
import urllib.request

import paho.mqtt.client as paho
import pytest
from helpers.mqtt_procs import HOST, SharedPortBridge
from helpers.mqtt_raw import Raw
from helpers.mqtt_sessions import SESSION_TAKEN_OVER, Device, start_named_bridge, stored_session
from helpers.serverproc import free_port
from helpers.waiting import wait_until
from kafka import KafkaProducer
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.timeout(180)


def taken_over(admin_port: int) -> float:
    with urllib.request.urlopen(f"http://{HOST}:{admin_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "mqtt_sessions_taken_over_total":
                return sample.value
    raise AssertionError("no mqtt_sessions_taken_over_total in /metrics")


@pytest.fixture
def commands(log_bootstrap):
    producer = KafkaProducer(bootstrap_servers=log_bootstrap, acks="all")

    def send(cid: str, value: bytes) -> None:
        producer.send("commands", key=cid.encode(), value=value).get(10)

    yield send
    producer.close()


def test_device_moving_to_another_bridge_takes_its_session_and_closes_the_old_connection(
    request, tmp_path, log_bootstrap, commands
) -> None:
    admin = free_port()
    a = start_named_bridge(request, tmp_path, log_bootstrap, "a", "--admin-listen", f"{HOST}:{admin}")
    b = start_named_bridge(request, tmp_path, log_bootstrap, "b")
    first = Device(request, "mover", a.port)
    assert first.connect() == (False, 0)
    first.subscribe_commands()
    commands("mover", b"c1")
    wait_until(lambda: first.got == [b"c1"], what="c1 through bridge a", timeout=20.0)

    second = Device(request, "mover", b.port)
    assert second.connect() == (True, 0), "session not present on the other bridge"
    wait_until(lambda: SESSION_TAKEN_OVER in first.disconnects, what="the old connection closed", timeout=20.0)
    commands("mover", b"c2")
    wait_until(lambda: b"c2" in second.got, what="c2 through bridge b", timeout=20.0)
    assert second.got == [b"c2"], "c1 was delivered and acknowledged on bridge a already"
    assert first.got == [b"c1"]
    assert "client mover taken over by bridge b" in a.output()
    assert taken_over(admin) == 1
    second.disconnect()


def test_messages_sent_while_away_reach_the_device_on_whichever_bridge_it_returns_to(
    request, tmp_path, log_bootstrap, commands
) -> None:
    a = start_named_bridge(request, tmp_path, log_bootstrap, "a")
    b = start_named_bridge(request, tmp_path, log_bootstrap, "b")
    dev = Device(request, "roamer", a.port)
    dev.connect()
    dev.subscribe_commands()
    commands("roamer", b"m1")
    wait_until(lambda: dev.got == [b"m1"], what="m1 on bridge a", timeout=20.0)
    dev.disconnect()  # offline; bridge a keeps the session in memory
    commands("roamer", b"m2")
    commands("roamer", b"m3")

    on_b = Device(request, "roamer", b.port)
    assert on_b.connect() == (True, 0)
    wait_until(lambda: on_b.got == [b"m2", b"m3"], what="what was sent while away, on bridge b", timeout=20.0)
    on_b.disconnect()
    commands("roamer", b"m4")

    back = Device(request, "roamer", a.port)  # bridge a gave the session up: it must ask b
    assert back.connect() == (True, 0)
    wait_until(lambda: back.got == [b"m4"], what="m4 back on bridge a", timeout=20.0)
    commands("roamer", b"m5")
    wait_until(lambda: back.got == [b"m4", b"m5"], what="m5 on bridge a", timeout=20.0)
    back.disconnect()
    for bridge in (a, b):
        assert "did not release session" not in bridge.output()


def test_a_dead_bridge_holds_nothing_up_for_long(request, tmp_path, log_bootstrap, commands) -> None:
    """The holder killed with -9 cannot release: the claim waits the takeover timeout and
    resumes from the last saved state, so every command still arrives."""
    a = start_named_bridge(request, tmp_path, log_bootstrap, "a")
    b = start_named_bridge(request, tmp_path, log_bootstrap, "b", "--takeover-timeout-s", "1")
    dev = Device(request, "orphan", a.port)
    dev.connect()
    dev.subscribe_commands()
    commands("orphan", b"k1")
    wait_until(lambda: dev.got == [b"k1"], what="k1 on bridge a", timeout=20.0)
    wait_until(lambda: (stored_session(log_bootstrap, "orphan") or {}).get("subs"), what="bridge a saved the subscription", timeout=20.0)  # saved every second (commit interval)
    a.kill9()
    commands("orphan", b"k2")
    moved = Device(request, "orphan", b.port)
    assert moved.connect() == (True, 0)
    wait_until(lambda: b"k2" in moved.got, what="k2 on bridge b", timeout=20.0)
    assert set(moved.got) <= {b"k1", b"k2"}  # k1 again only if a died before saving its ack
    assert "did not release session orphan" in b.output()
    moved.disconnect()


def test_two_bridges_claiming_at_once_leave_one_connection(request, tmp_path, log_bootstrap, commands) -> None:
    """The same client id connecting to three bridges at once: the newest claim in the log
    wins, every other connection is closed or refused, and the winner gets commands."""
    bridges = [start_named_bridge(request, tmp_path, log_bootstrap, n) for n in ("a", "b", "c")]
    devices = [Device(request, "twin", br.port) for br in bridges]
    threads = [threading.Thread(target=d.connect) for d in devices]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)

    def alive() -> list[Device]:
        return [d for d in devices if d.connack[-1][1] == 0 and not d.disconnects]

    wait_until(lambda: len(alive()) == 1, timeout=20, what="exactly one connection left")
    (winner,) = alive()
    winner.subscribe_commands()
    commands("twin", b"t1")
    wait_until(lambda: winner.got == [b"t1"], what="t1 to the winner", timeout=20.0)
    assert len(alive()) == 1
    winner.disconnect()


def test_two_bridges_behind_one_port_serve_the_devices_each_accepted(request, tmp_path, log_bootstrap,
                                                                      commands) -> None:
    """``--reuse-port``: two bridge processes on one port, the kernel spreads the devices
    over them, and each device gets its own commands from whichever bridge took it."""
    admins = [free_port(), free_port()]
    port: int | None = None
    bridges = []
    for name, admin in zip("ab", admins, strict=True):
        b = SharedPortBridge(log_bootstrap, tmp_path / f"bridge-{name}.log", "--log-format", "text",
                             "--bridge-id", name, "--reuse-port", "--admin-listen", f"{HOST}:{admin}",
                             port=port)
        request.addfinalizer(b.stop)
        b.start()
        port = b.port
        bridges.append(b)
    assert port is not None
    devices: list[Device] = []
    while len(devices) < 60 and not all(connected(a) > 0 for a in admins):
        dev = Device(request, f"spread-{len(devices)}", port)
        assert dev.connect() == (False, 0)
        dev.subscribe_commands()
        devices.append(dev)
    assert all(connected(a) > 0 for a in admins), "one bridge took every one of 60 connections"
    assert sum(connected(a) for a in admins) == len(devices)
    for dev in devices:
        commands(dev.cid, dev.cid.encode())
    for dev in devices:
        wait_until(lambda dev=dev: dev.got == [dev.cid.encode()], what=f"the command of {dev.cid}", timeout=20.0)
        dev.disconnect()


def connected(admin_port: int) -> float:
    with urllib.request.urlopen(f"http://{HOST}:{admin_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "mqtt_connected_devices":
                return sample.value
    raise AssertionError("no mqtt_connected_devices in /metrics")


def test_a_delayed_will_on_the_old_bridge_follows_the_new_connections_clean_start(
    request, tmp_path, log_bootstrap
) -> None:
    """MQTT 5 3.1.2.5 across bridges: a device that moves to another bridge with Clean
    Start 0 continues its session, so the old bridge never sends its delayed will; with
    Clean Start 1 the session ends, so the old bridge sends it at once."""

    from mqtt_bridge.codec import MQTT_5, Connect, Will, encode

    acl = tmp_path / "acl"
    acl.write_text("topic readwrite wills/#\n")
    a = start_named_bridge(request, tmp_path, log_bootstrap, "a", "--acl-file", str(acl))
    b = start_named_bridge(request, tmp_path, log_bootstrap, "b", "--acl-file", str(acl))
    got: list[str] = []
    ev = threading.Event()
    watcher = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="will-watcher", protocol=paho.MQTTv5)
    watcher.on_message = lambda c, u, m: got.append(m.topic)
    watcher.on_subscribe = lambda *args: ev.set()
    request.addfinalizer(watcher.loop_stop)
    watcher.connect(HOST, a.port)  # wills on unmapped topics are routed by the bridge that sends them
    watcher.loop_start()
    watcher.subscribe("wills/#", qos=1)
    assert ev.wait(10), "no SUBACK"

    def with_will(port: int, cid: str, delay: int) -> Raw:
        r = Raw(port, MQTT_5)
        r.send(encode(Connect(cid, MQTT_5, True, 60, None, None, Will(f"wills/{cid}", b"gone", 1, False,
                              {"will_delay_interval": delay}), {"session_expiry_interval": 600}), MQTT_5))
        assert r.packet().reason == 0
        return r

    moved = with_will(a.port, "w-moved", 2)
    again = Raw(b.port, MQTT_5)
    assert again.connect("w-moved", clean=False, props={"session_expiry_interval": 600}).session_present
    assert moved.packet().reason == SESSION_TAKEN_OVER
    ended = with_will(a.port, "w-ended", 30)
    fresh = Raw(b.port, MQTT_5)
    fresh.connect("w-ended", clean=True, props={"session_expiry_interval": 600})
    assert ended.packet().reason == SESSION_TAKEN_OVER
    wait_until(lambda: "wills/w-ended" in got, timeout=10, what="the will of the session Clean Start ended")
    marker = with_will(a.port, "w-marker", 3)  # its will comes after w-moved's would have
    marker.close()
    wait_until(lambda: "wills/w-marker" in got, timeout=15, what="the marker's will")
    assert got == ["wills/w-ended", "wills/w-marker"]
    for r in (moved, again, ended, fresh):
        r.close()
    watcher.disconnect()
    watcher.loop_stop()
