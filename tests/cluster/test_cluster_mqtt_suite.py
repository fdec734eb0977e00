"""The MQTT bridge's stateful behaviours on a 3-broker cluster (RF 3, min.insync.replicas
2) with a broker killed (kill -9) in between: persistent sessions whose session-topic
leader died, retained messages whose topic leader died, and commands/OTA downlink that
keeps flowing through a leader kill. Real etcd, brokers, bridges, paho-mqtt devices,
kafka-python producers, all on 127.0.0.1. (QoS 1/2 uplink through a leader kill is in
test_cluster_mqtt.py; session takeover across bridges runs on a cluster in
test_mqtt_takeover.py.)
"""

from __future__ import annotations

import threading

import paho.mqtt.client as paho
import pytest
from helpers.cluster_clients import create
from helpers.clusterprocs import Cluster
from helpers.mqtt_procs import HOST, BridgeProcess, mosquitto_pub
from helpers.mqtt_retained import RETAINED, Subscriber, retained_in_log, start_acl_bridge
from helpers.mqtt_sessions import SESSION_TAKEN_OVER, SESSIONS, start_named_bridge, stored_session
from helpers.mqtt_sessions import Device as TakeoverDevice
from helpers.waiting import wait_until
from kafka import KafkaProducer
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

from kafkaproto.murmur2 import partition_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def start_bridge(request, tmp_path, bootstrap: str, name: str, *args: str) -> BridgeProcess:
    b = BridgeProcess(bootstrap, tmp_path / f"bridge-{name}.log", "--log-format", "text",
                      "--bridge-id", name, "--delivery-timeout-s", "60", *args)
    request.addfinalizer(b.stop)
    b.start()
    return b


def leader_of_key(cluster: Cluster, topic: str, key: bytes) -> int:
    """The node leading the partition Kafka's default partitioner puts ``key`` in."""
    parts = wait_until(lambda: (m := cluster.metadata().topics.get(topic)) and m.partitions,
                       30, f"{topic} in the metadata")
    p = partition_for(key, len(parts))
    return wait_until(lambda: (x := cluster.partition(topic, p)) and x.leader > 0 and x.leader,
                      30, f"a leader for {topic}-{p}")


def kill_leader(cluster: Cluster, topic: str, key: bytes) -> int:
    """kill -9 the leader of ``key``'s partition; wait until another broker leads it."""
    node = leader_of_key(cluster, topic, key)
    cluster.brokers[node].kill9()
    wait_until(lambda: leader_of_key(cluster, topic, key) != node, 60,
               f"a new leader for {topic} after node {node} was killed")
    return node


class Device:
    """A paho v5 device with a persistent session (expiry one hour), QoS 1 subscriptions."""

    def __init__(self, request, cid: str, port: int) -> None:
        self.cid = cid
        self.got: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()
        self.connack: list[tuple[bool, int]] = []
        self.ev = threading.Event()
        self.c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=cid, protocol=paho.MQTTv5)
        self.c.on_message = self._on_message
        self.c.on_connect = self._on_connect
        self.c.on_subscribe = lambda c, u, mid, rcs, props: self.ev.set()
        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = 3600
        self.ev.clear()
        request.addfinalizer(self.c.loop_stop)
        self.c.connect(HOST, port, clean_start=False, properties=props)
        self.c.loop_start()
        assert self.ev.wait(15), "no CONNACK"

    def _on_message(self, c, u, m) -> None:
        with self.lock:
            self.got.append((m.topic, m.payload))

    def _on_connect(self, c, u, flags, rc, props) -> None:
        self.connack.append((bool(flags.session_present), rc.value))
        self.ev.set()

    def payloads(self, topic: str) -> list[bytes]:
        with self.lock:
            return [p for t, p in self.got if t == topic]

    def subscribe(self, *filters: str) -> None:
        self.ev.clear()
        self.c.subscribe([(f, SubscribeOptions(qos=1)) for f in filters])
        assert self.ev.wait(10), "no SUBACK"

    def disconnect(self) -> None:
        self.c.disconnect()
        self.c.loop_stop()


@pytest.fixture
def producer(cluster):
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", retries=20,
                      retry_backoff_ms=200, request_timeout_ms=10000, max_in_flight_requests_per_connection=1)
    try:
        yield p
    finally:
        p.close(5)


def test_offline_commands_reach_the_device_after_the_session_leader_was_killed(
    request, tmp_path, cluster, producer
) -> None:
    """The bridge stops while the device is away; the session topic's leader dies; a
    fresh bridge loads the session from the new leader and delivers what was sent."""
    create(cluster, "commands", partitions=1, rf=3)
    cid = "sleeper"
    topic = f"devices/{cid}/commands"
    bridge = start_bridge(request, tmp_path, cluster.bootstrap, "a", "--session-commit-interval-s", "0.2")
    dev = Device(request, cid, bridge.port)
    assert dev.connack[-1] == (False, 0)
    dev.subscribe(topic)
    producer.send("commands", key=cid.encode(), value=b"c1").get(20)
    wait_until(lambda: dev.payloads(topic) == [b"c1"], 30, "c1 online")
    wait_until(lambda: (stored_session(cluster.bootstrap, cid) or {}).get("subs"), 30,
               "the subscription saved in the session topic")
    dev.disconnect()
    assert bridge.stop() == 0, bridge.tail()

    killed = kill_leader(cluster, SESSIONS, cid.encode())
    for value in (b"c2", b"c3"):
        producer.send("commands", key=cid.encode(), value=value).get(30)
    bridge.start()
    back = Device(request, cid, bridge.port)
    assert back.connack[-1] == (True, 0), f"session lost with node {killed}"
    wait_until(lambda: back.payloads(topic) == [b"c2", b"c3"], 60,
               "the commands sent while away, after reconnect")
    producer.send("commands", key=cid.encode(), value=b"c4").get(30)
    wait_until(lambda: back.payloads(topic) == [b"c2", b"c3", b"c4"], 30, "c4 online")
    back.disconnect()


def test_session_saves_go_to_the_new_leader_after_the_session_leader_was_killed(
    request, tmp_path, cluster, producer
) -> None:
    """The session topic's leader dies while the bridge runs: a later change (a new
    subscription, acknowledged commands) is saved to the new leader, so a bridge killed
    with -9 afterwards leaves a session that restores that subscription."""
    create(cluster, "commands", partitions=1, rf=3)
    create(cluster, "ota", partitions=1, rf=3)
    cid = "saver"
    topic = f"devices/{cid}/commands"
    bridge = start_bridge(request, tmp_path, cluster.bootstrap, "a", "--session-commit-interval-s", "0.2")
    dev = Device(request, cid, bridge.port)
    dev.subscribe(topic)
    producer.send("commands", key=cid.encode(), value=b"c1").get(20)
    wait_until(lambda: dev.payloads(topic) == [b"c1"], 30, "c1 online")
    wait_until(lambda: (stored_session(cluster.bootstrap, cid) or {}).get("subs"), 30,
               "the subscription saved in the session topic")
    killed = kill_leader(cluster, SESSIONS, cid.encode())
    dev.subscribe("ota")
    wait_until(lambda: "ota" in (stored_session(cluster.bootstrap, cid) or {}).get("subs", {}), 60,
               f"the new subscription saved after node {killed} was killed")
    dev.disconnect()
    bridge.kill9()

    producer.send("commands", key=cid.encode(), value=b"c2").get(30)
    producer.send("ota", value=b"fw-1").get(30)
    bridge.start()
    back = Device(request, cid, bridge.port)
    assert back.connack[-1] == (True, 0)
    wait_until(lambda: b"c2" in back.payloads(topic) and back.payloads("ota") == [b"fw-1"], 60,
               "c2 and the OTA broadcast through the restored subscriptions")
    assert set(back.payloads(topic)) <= {b"c1", b"c2"}  # c1 again only if its ack was unsaved
    back.disconnect()


def test_retained_messages_survive_a_broker_kill(request, tmp_path, cluster) -> None:
    """Retained messages live in a replicated compacted topic: its leader is killed
    while the bridge runs, the bridge writes the next one to the new leader, and a bridge
    started afterwards (the dead broker first in its bootstrap list) hands both to a new
    subscriber."""
    first = start_acl_bridge(request, tmp_path, cluster.bootstrap, "bridge-a")
    mosquitto_pub(first.port, "-t", "chat/r1", "-m", "one", "-r", "-q", "1")
    wait_until(lambda: b"chat/r1" in retained_in_log(cluster.bootstrap), 30,
               "the retained message in the compacted topic")
    every = cluster.bootstrap
    killed = kill_leader(cluster, RETAINED, b"chat/r1")
    mosquitto_pub(first.port, "-t", "chat/r2", "-m", "two", "-r", "-q", "1")
    wait_until(lambda: retained_in_log(cluster.bootstrap).keys() >= {b"chat/r1", b"chat/r2"}, 60,
               "the second retained message, written after the leader kill")
    assert first.stop() == 0, first.tail()

    # configured with every broker, the dead one first: it bootstraps from the others
    dead = cluster.brokers[killed].bootstrap
    bootstrap = ",".join([dead, *(b for b in every.split(",") if b != dead)])
    second = start_acl_bridge(request, tmp_path, bootstrap, "bridge-b")
    got = Subscriber(second.port, request).until_marker(second.port)
    assert sorted((m.topic, m.payload) for m in got) == [("chat/r1", b"one"), ("chat/r2", b"two")]
    assert all(m.retain for m in got)


def test_commands_and_ota_keep_flowing_through_a_leader_kill(request, tmp_path, cluster, producer) -> None:
    """Every command and OTA broadcast the log acknowledged (acks=all) reaches the
    subscribed device, also those sent after the commands topic's leader was killed."""
    create(cluster, "commands", partitions=1, rf=3)
    create(cluster, "ota", partitions=1, rf=3)
    cid = "fleet1"
    cmd_topic = f"devices/{cid}/commands"
    bridge = start_bridge(request, tmp_path, cluster.bootstrap, "a")
    dev = Device(request, cid, bridge.port)
    dev.subscribe(cmd_topic, "ota")
    sent_cmd: list[bytes] = []
    sent_ota: list[bytes] = []

    def send(n: int) -> None:
        for i in range(n):
            value = f"cmd-{len(sent_cmd):04d}".encode()
            producer.send("commands", key=cid.encode(), value=value).get(30)
            sent_cmd.append(value)
            if i % 5 == 0:
                ota = f"fw-{len(sent_ota):04d}".encode()
                producer.send("ota", value=ota).get(30)
                sent_ota.append(ota)

    send(30)
    wait_until(lambda: len(dev.payloads(cmd_topic)) >= 30, 30, "the first commands")
    killed = kill_leader(cluster, "commands", cid.encode())
    send(30)
    wait_until(lambda: set(dev.payloads(cmd_topic)) >= set(sent_cmd), 60,
               f"every command after node {killed} was killed")
    wait_until(lambda: set(dev.payloads("ota")) >= set(sent_ota), 30, "every OTA broadcast")
    assert dev.payloads(cmd_topic)[:30] == sent_cmd[:30]
    # QoS 1 allows a redelivery, never a gap; order is kept per partition
    got = list(dict.fromkeys(dev.payloads(cmd_topic)))
    assert got == sent_cmd, "commands out of order"
    dev.disconnect()


def test_takeover_across_bridges_after_the_session_leader_was_killed(
    request, tmp_path, cluster, producer
) -> None:
    """The claim of a moving device goes through the session topic: with its leader
    killed while the device sits on bridge a, bridge b still takes the session over."""
    create(cluster, "commands", partitions=1, rf=3)
    a = start_named_bridge(request, tmp_path, cluster.bootstrap, "a")
    b = start_named_bridge(request, tmp_path, cluster.bootstrap, "b")
    first = TakeoverDevice(request, "mover", a.port)
    assert first.connect() == (False, 0)
    first.subscribe_commands()
    producer.send("commands", key=b"mover", value=b"c1").get(20)
    wait_until(lambda: first.got == [b"c1"], 30, "c1 through bridge a")
    killed = kill_leader(cluster, SESSIONS, b"mover")

    # While the session partition fails over, bridge b cannot read it to its end and
    # refuses the claim with Server unavailable (0x88) rather than claiming on a stale
    # view; the device connects again, as devices do.
    refusals: list[int] = []

    def accepted() -> TakeoverDevice | None:
        device = TakeoverDevice(request, "mover", b.port)
        result = device.connect()
        if result[1] == 0x88:
            refusals.append(result[1])
            device.disconnect()
            return None
        assert result == (True, 0), f"session not present on bridge b after node {killed} died"
        return device

    second = wait_until(accepted, 60, "bridge b to accept the device")
    wait_until(lambda: SESSION_TAKEN_OVER in first.disconnects, 30, "the old connection closed")
    producer.send("commands", key=b"mover", value=b"c2").get(30)
    wait_until(lambda: b"c2" in second.got, 30, "c2 through bridge b")
    assert second.got == [b"c2"] and first.got == [b"c1"]
    second.disconnect()
