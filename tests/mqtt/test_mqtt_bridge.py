"""The bridge with real processes and real clients: logserver, mqtt-bridge, paho-mqtt
(3.1.1 and 5), Debian's mosquitto_pub/mosquitto_sub, kafka-python on the Kafka side.

One logserver (3 partitions per topic) and one bridge per module; every process is
stopped by pid in the fixtures' finalizers, also on failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import sys
import threading
import time
import uuid

import paho.mqtt.client as paho
import pytest
from helpers.mqtt_client import MqttClient, connect_many
from helpers.mqtt_kafka import read_topic
from helpers.mqtt_procs import HOST, BridgeProcess
from kafka import KafkaProducer
from kafka.partitioner.default import murmur2 as kp_murmur2

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def bridge(request, module_server, tmp_path_factory) -> BridgeProcess:
    """The default device binding; the tests' own streams are allowed uplink topics."""
    log = tmp_path_factory.mktemp("bridge") / "bridge.log"
    b = BridgeProcess(module_server.bootstrap, log, "--max-packet-size", "65536",
                      "--log-format", "text", "--uplink-topic", "telemetry*",
                      "--uplink-topic", "mp*")
    request.addfinalizer(b.stop)
    b.start()
    return b


@pytest.fixture(scope="module")
def routing_bridge(request, module_server, tmp_path_factory) -> BridgeProcess:
    """A bridge whose ACL opens the non-device topics the local-routing tests use."""
    work = tmp_path_factory.mktemp("routing-bridge")
    acl = work / "acl"
    acl.write_text("topic readwrite site/#\ntopic readwrite status/#\ntopic readwrite jobs/#\n")
    b = BridgeProcess(module_server.bootstrap, work / "bridge.log", "--log-format", "text",
                      "--acl-file", str(acl))
    request.addfinalizer(b.stop)
    b.start()
    return b


def paho_client(cid: str, version: int, **kw) -> paho.Client:
    proto = paho.MQTTv5 if version == 5 else paho.MQTTv311
    c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=cid, protocol=proto, **kw)
    return c


def test_console_script_help() -> None:
    out = subprocess.run([sys.executable, "-m", "mqtt_bridge", "--help"], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0
    for flag in ("--listen", "--bootstrap-servers", "--uplink", "--max-connections",
                 "--max-connection-rate", "--max-subscriptions", "--max-packet-size"):
        assert flag in out.stdout


def test_100_devices_qos1_telemetry_lands_where_the_mapping_says(bridge, module_server) -> None:
    stream = "telemetry" + uuid.uuid4().hex[:6]
    n_devices, per_device = 100, 5
    acked: dict[str, int] = {}
    lock = threading.Lock()
    clients = []
    for i in range(n_devices):
        version = 5 if i % 2 else 4
        c = paho_client(f"dev-{i}", version)
        c.connect(HOST, bridge.port, keepalive=30)
        c.loop_start()
        clients.append((c, version))
    try:
        infos = []
        for i, (c, version) in enumerate(clients):
            for j in range(per_device):
                props = None
                if version == 5:
                    from paho.mqtt.packettypes import PacketTypes
                    from paho.mqtt.properties import Properties

                    props = Properties(PacketTypes.PUBLISH)
                    props.UserProperty = [("seq", str(j)), ("fw", "1.2")]
                info = c.publish(f"devices/dev-{i}/{stream}", f"{i}:{j}".encode(), qos=1,
                                 properties=props)
                infos.append((f"dev-{i}", info))
        for dev, info in infos:
            info.wait_for_publish(timeout=30)
            assert info.is_published()
            with lock:
                acked[dev] = acked.get(dev, 0) + 1
    finally:
        for c, _v in clients:
            c.disconnect()
            c.loop_stop()
    records = read_topic(module_server.bootstrap, stream, n_devices * per_device)
    assert len(records) == n_devices * per_device
    nparts = len({r.partition for r in records} | {0, 1, 2})
    for r in records:
        dev = r.key.decode()
        i, _j = r.value.decode().split(":")
        assert dev == f"dev-{i}"
        assert r.partition == (kp_murmur2(r.key) & 0x7FFFFFFF) % nparts
        headers = dict(r.headers)
        assert headers["mqtt.topic"] == f"devices/{dev}/{stream}".encode()
        assert headers["mqtt.client_id"] == dev.encode()
        if int(i) % 2:
            assert headers["fw"] == b"1.2" and "seq" in headers
    per_dev_order: dict[str, list[int]] = {}
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        i, j = r.value.decode().split(":")
        per_dev_order.setdefault(i, []).append(int(j))
    assert all(v == list(range(per_device)) for v in per_dev_order.values())


def test_commands_reach_only_their_device(bridge, module_server) -> None:
    got: dict[str, list[bytes]] = {f"cmd-{i}": [] for i in range(10)}
    subscribed = threading.Barrier(11, timeout=20)
    clients = []

    def on_message(client, userdata, msg) -> None:
        got[userdata].append(msg.payload)

    for cid in got:
        c = paho_client(cid, 4, userdata=cid)
        c.on_message = on_message
        c.on_subscribe = lambda *a: subscribed.wait()
        c.connect(HOST, bridge.port)
        c.loop_start()
        c.subscribe(f"devices/{cid}/commands", qos=1)
        clients.append(c)
    try:
        subscribed.wait()
        producer = KafkaProducer(bootstrap_servers=module_server.bootstrap)
        for cid in got:
            for k in range(3):
                producer.send("commands", key=cid.encode(), value=f"{cid}/{k}".encode())
        # Nothing extra may arrive: each device's marker, sent after its commands (same
        # key, same partition, so in order), is the witness that all of them were routed.
        for cid in got:
            producer.send("commands", key=cid.encode(), value=f"{cid}/end".encode())
        producer.flush()
        producer.close()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(f"{cid}/end".encode() not in v
                                                  for cid, v in got.items()):
            time.sleep(0.05)
    finally:
        for c in clients:
            c.disconnect()
            c.loop_stop()
    for cid, payloads in got.items():
        assert payloads == [f"{cid}/{k}".encode() for k in (0, 1, 2, "end")], cid


def test_ota_notice_reaches_1000_devices(bridge, module_server) -> None:
    """1,000 devices (the asyncio load generator, one process) + one mosquitto_sub."""
    sub = subprocess.Popen(["mosquitto_sub", "-h", HOST, "-p", str(bridge.port), "-t", "ota",
                            "-q", "1", "-C", "1", "-W", "30"], stdout=subprocess.PIPE, text=True)

    async def run() -> set[str]:
        received: set[str] = set()
        done = asyncio.Event()

        def make(cid: str):
            def on(p, t) -> None:
                if p.payload == b"firmware 2.0 available":
                    received.add(cid)
                    if len(received) == 1000:
                        done.set()
            return on

        clients = []
        for i in range(0, 1000, 100):
            batch = [f"ota-dev-{j}" for j in range(i, i + 100)]
            cs = await connect_many(HOST, bridge.port, batch)
            for c in cs:
                c.on_message = make(c.client_id)
                c.messages = None
            clients += cs
        await asyncio.gather(*(c.subscribe("ota") for c in clients))
        await asyncio.sleep(0.3)
        await asyncio.to_thread(_produce_ota, module_server.bootstrap)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), 30)
        await asyncio.gather(*(c.disconnect() for c in clients))
        return received

    try:
        received = asyncio.run(run())
        out, _ = sub.communicate(timeout=30)
    finally:
        sub.kill()
    assert len(received) == 1000
    assert out.strip() == "firmware 2.0 available"


def _produce_ota(bootstrap: str) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap)
    p.send("ota", value=b"firmware 2.0 available")
    p.flush()
    p.close()


@pytest.mark.skipif(shutil.which("mosquitto_pub") is None, reason="mosquitto-clients missing")
def test_mosquitto_clients_retained_and_local_routing(routing_bridge) -> None:
    bridge = routing_bridge
    topic = f"site/{uuid.uuid4().hex[:6]}/status"
    subprocess.run(["mosquitto_pub", "-h", HOST, "-p", str(bridge.port), "-t", topic, "-m", "up",
                    "-r", "-q", "1"], check=True, timeout=20)
    out = subprocess.run(["mosquitto_sub", "-h", HOST, "-p", str(bridge.port), "-t", "site/+/status",
                          "-C", "1", "-W", "10", "-V", "mqttv5"], capture_output=True, text=True,
                         timeout=20)
    assert out.stdout.strip() == "up"


def test_mosquitto_pub_uplink(bridge, module_server) -> None:
    stream = "mp" + uuid.uuid4().hex[:6]
    for v in ("mqttv311", "mqttv5"):
        subprocess.run(["mosquitto_pub", "-h", HOST, "-p", str(bridge.port), "-V", v, "-q", "1",
                        "-i", "gw-7", "-t", f"devices/gw-7/{stream}", "-m", v], check=True, timeout=20)
    records = read_topic(module_server.bootstrap, stream, 2)
    assert sorted(r.value for r in records) == [b"mqttv311", b"mqttv5"]
    assert {r.key for r in records} == {b"gw-7"}


def test_will_and_shared_subscription(routing_bridge) -> None:
    bridge = routing_bridge
    async def run() -> None:
        watcher = MqttClient("watcher", version=5)
        await watcher.connect(HOST, bridge.port)
        await watcher.subscribe("status/#")
        g1, g2 = MqttClient("g1", version=5), MqttClient("g2", version=5)
        for g in (g1, g2):
            await g.connect(HOST, bridge.port)
            await g.subscribe("$share/workers/jobs/+")
        from mqtt_bridge.codec import Will

        dying = MqttClient("dying", version=4)
        await dying.connect(HOST, bridge.port, will=Will("status/dying", b"gone", 1))
        dying.abort()
        p = await asyncio.wait_for(watcher.messages.get(), 10)
        assert (p.topic, p.payload) == ("status/dying", b"gone")
        pub = MqttClient("jobpub", version=5)
        await pub.connect(HOST, bridge.port)
        await asyncio.gather(*(pub.publish(f"jobs/{i}", b"j", 1) for i in range(20)))
        # Nothing extra may arrive: markers, published after the jobs, until each member
        # has had one, are the witness that both queues hold everything routed to them.
        got: dict[MqttClient, list[str]] = {g1: [], g2: []}
        marker = 0
        while not all(any(t.startswith("jobs/end") for t in topics) for topics in got.values()):
            assert marker < 200, f"markers never reached both members: {got}"
            await pub.publish(f"jobs/end{marker}", b"m", 1)
            marker += 1
            for g, topics in got.items():
                while not g.messages.empty():
                    topics.append(g.messages.get_nowait().topic)
            await asyncio.sleep(0.01)
        jobs = {g: [t for t in topics if not t.startswith("jobs/end")] for g, topics in got.items()}
        assert len(jobs[g1]) + len(jobs[g2]) == 20
        assert jobs[g1] and jobs[g2]
        assert sorted(jobs[g1] + jobs[g2]) == sorted(f"jobs/{i}" for i in range(20))
        for c in (watcher, g1, g2, pub):
            await c.disconnect()

    asyncio.run(run())


def test_client_id_rules_and_takeover(bridge) -> None:
    async def run() -> None:
        c = MqttClient("", version=4)
        ack = await c.connect(HOST, bridge.port, clean=False)
        assert ack.reason == 2  # identifier rejected
        c5 = MqttClient("", version=5)
        ack = await c5.connect(HOST, bridge.port)
        assert ack.reason == 0 and ack.properties["assigned_client_identifier"]
        a = MqttClient("same", version=5)
        await a.connect(HOST, bridge.port)
        b = MqttClient("same", version=5)
        await b.connect(HOST, bridge.port)
        await asyncio.wait_for(a.closed, 5)
        assert a.disconnect_packet is not None and a.disconnect_packet.reason == 0x8E
        await b.disconnect()
        await c5.disconnect()

    asyncio.run(run())


def test_records_parked_for_metadata_are_acknowledged_only_once_all_are_in_the_log(
        module_server) -> None:
    """The uplink producer's records for a topic whose metadata it does not have yet
    share one future; it resolves only when every batch they landed in (several here:
    small batches, 3 partitions) is acknowledged, and the log holds every record."""
    from commonlib.kafkaclient import KafkaClient
    from mqtt_bridge.kafka_producer import Producer

    topic = f"parked-{uuid.uuid4().hex[:8]}"
    n = 3000
    pad = b"." * 94  # 3000 records of 100 bytes: about 21 batches of 20 kB

    async def run() -> tuple[int, int, int]:
        client = KafkaClient(module_server.bootstrap, client_id="mqtt-bridge")
        producer = Producer(client, batch_bytes=20_000)
        producer.start()
        try:
            futures = [producer.send_shared(topic, b"key-%d" % (i % 7), b"%06d" % i + pad)
                       for i in range(n)]
            distinct = {id(f): f for f in futures}
            await asyncio.wait_for(next(iter(distinct.values())), 30)
            acked_then = producer.records_acked
            return len(distinct), acked_then, producer.requests_sent
        finally:
            await producer.close()
            await client.close()

    distinct, acked_then, requests = asyncio.run(run())
    assert distinct == 1
    assert acked_then == n
    assert requests > 3  # more than one batch per partition: the future waited for all
    values = sorted(r.value for r in read_topic(module_server.bootstrap, topic, n))
    assert values == [b"%06d" % i + pad for i in range(n)]
