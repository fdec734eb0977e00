"""Faults and bad input: persistent sessions across reconnects and bridge restarts, the log
server killed while devices publish, garbage and protocol violations, keep-alive, auth.
Real processes only; each is stopped by pid in a finalizer, also when a test fails.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import threading
import time

import paho.mqtt.client as paho
import pytest
from helpers.mqtt_client import MqttClient, connect_many
from helpers.mqtt_kafka import read_topic
from helpers.mqtt_procs import HOST, BridgeProcess
from kafka import KafkaProducer

from mqtt_bridge.codec import Connect, Publish, encode

pytestmark = pytest.mark.timeout(180)


def start_bridge(request, tmp_path, bootstrap: str, *args: str, port: int | None = None) -> BridgeProcess:
    b = BridgeProcess(bootstrap, tmp_path / "bridge.log", "--log-format", "text", *args, port=port)
    request.addfinalizer(b.stop)
    b.start()
    return b


def produce(bootstrap: str, topic: str, items: list[tuple[bytes | None, bytes]]) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap)
    for key, value in items:
        p.send(topic, key=key, value=value)
    p.flush()
    p.close()


class PahoDevice:
    """A paho 3.1.1 device with a persistent session (clean_session=False)."""

    def __init__(self, cid: str, port: int) -> None:
        self.got: list[bytes] = []
        self.port = port
        self.client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=cid,
                                  protocol=paho.MQTTv311, clean_session=False)
        self.client.on_message = lambda c, u, m: self.got.append(m.payload)
        self.connected = threading.Event()
        self.subscribed = threading.Event()
        self.client.on_subscribe = lambda *args: self.subscribed.set()
        self.present: list[bool] = []

        def on_connect(c, u, flags, rc, props) -> None:
            self.present.append(bool(flags.session_present))
            self.connected.set()

        self.client.on_connect = on_connect

    def connect(self) -> None:
        self.connected.clear()
        self.client.connect(HOST, self.port)
        self.client.loop_start()
        assert self.connected.wait(10)

    def disconnect(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()

    def wait_for(self, n: int, timeout: float = 60) -> None:  # a deadline: returns when n arrived
        deadline = time.monotonic() + timeout
        while len(self.got) < n and time.monotonic() < deadline:
            time.sleep(0.05)


@pytest.mark.parametrize("store", ["group", "topic"])
def test_persistent_session_survives_reconnect_and_bridge_restart(
    request, tmp_path, server, store: str
) -> None:
    bridge = start_bridge(request, tmp_path, server.bootstrap, "--session-store", store)
    dev = PahoDevice("truck-1", bridge.port)
    dev.connect()
    assert dev.present == [False]
    r = dev.client.subscribe("devices/truck-1/commands", qos=1)
    assert r[0] == 0
    assert dev.subscribed.wait(10), "no SUBACK"
    dev.disconnect()

    produce(server.bootstrap, "commands", [(b"truck-1", f"a{i}".encode()) for i in range(3)]
            + [(b"truck-2", b"not yours")])
    dev.connect()  # same process: no re-subscribe
    dev.wait_for(3)
    dev.disconnect()
    assert dev.present[-1] is True
    assert dev.got == [b"a0", b"a1", b"a2"]

    assert bridge.stop() == 0  # clean stop: session state saved in the log
    produce(server.bootstrap, "commands", [(b"truck-1", f"b{i}".encode()) for i in range(3)])
    bridge.start()
    produce(server.bootstrap, "commands", [(b"truck-1", b"c0")])
    dev.connect()
    dev.wait_for(7)
    # nothing more may arrive: a marker sent after everything else is the witness
    produce(server.bootstrap, "commands", [(b"truck-1", b"end")])
    dev.wait_for(8)
    dev.disconnect()
    assert dev.present[-1] is True
    assert dev.got == [b"a0", b"a1", b"a2", b"b0", b"b1", b"b2", b"c0", b"end"]


def test_kill_log_server_while_devices_publish(request, tmp_path, server) -> None:
    """No PUBACK for unlogged data; the bridge reconnects; nothing PUBACKed is missing."""
    stream = "killtest"
    acl = tmp_path / "acl"  # devices keep their own topics; the witness needs a chat room
    acl.write_text("topic readwrite chat/#\npattern readwrite devices/%c/#\n")
    bridge = start_bridge(request, tmp_path, server.bootstrap, "--delivery-timeout-s", "60",
                          "--uplink-topic", stream, "--acl-file", str(acl))
    acked: list[str] = []
    ack_times: list[float] = []
    phases: dict[str, float] = {}
    blocked: set[str] = set()  # devices waiting on a full window of unacknowledged messages

    async def device(c: MqttClient, stop: asyncio.Event) -> None:
        seq = 0
        window: set[asyncio.Future] = set()
        while not stop.is_set():
            payload = f"{c.client_id}:{seq}"
            fut = c.publish(f"devices/{c.client_id}/{stream}", payload.encode(), 1)

            def done(f: asyncio.Future, payload: str = payload) -> None:
                if not f.cancelled() and f.exception() is None:
                    acked.append(payload)
                    ack_times.append(time.monotonic())

            fut.add_done_callback(done)
            window.add(fut)
            seq += 1
            if len(window) >= 5:
                blocked.add(c.client_id)
                finished, window = await asyncio.wait(window, return_when=asyncio.FIRST_COMPLETED)
                blocked.discard(c.client_id)
            await asyncio.sleep(0.005)
        if window:
            await asyncio.wait(window, timeout=30)

    async def until(condition, what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.05)

    async def run() -> None:
        clients = await connect_many(HOST, bridge.port, [f"k{i}" for i in range(20)])
        stop = asyncio.Event()
        bystander = MqttClient("bystander", version=5)
        await bystander.connect(HOST, bridge.port)
        await bystander.subscribe("chat/witness")
        latecomer = MqttClient("latecomer", version=5)
        await latecomer.connect(HOST, bridge.port)
        tasks = [asyncio.create_task(device(c, stop)) for c in clients]
        await until(lambda: len(acked) > 200, "200 PUBACKs with the log server up")
        server.kill9()  # from this thread: PR_SET_PDEATHSIG ties the child to its thread
        phases["killed"] = time.monotonic()
        # A message for the log sent after the kill: it must stay without PUBACK...
        late = latecomer.publish(f"devices/latecomer/{stream}", b"latecomer:late", 1)
        # ...while every device runs into its window, as nothing is acknowledged any more
        await until(lambda: len(blocked) == len(clients), "every device to wait for PUBACKs")
        # Witness that the bridge is alive meanwhile: it answers a QoS 1 message that
        # needs no log (local routing), sent after the late one (on another connection:
        # PUBACKs on one connection keep the order of its PUBLISHes).
        await asyncio.wait_for(bystander.publish("chat/witness", b"alive", 1), 60)
        witnessed = await asyncio.wait_for(bystander.messages.get(), 60)
        assert witnessed.payload == b"alive"
        assert not late.done(), "PUBACK for a message sent while the log server was dead"
        phases["restart"] = time.monotonic()
        server.start()
        await asyncio.wait_for(late, 60)
        acked.append("latecomer:late")
        restarted = len(acked)
        await until(lambda: len(acked) > restarted + 100, "100 PUBACKs after the restart")
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
        for c in [*clients, bystander, latecomer]:
            await c.disconnect()

    asyncio.run(run())
    assert any(t > phases["restart"] for t in ack_times), "no PUBACK after the log came back"
    records = read_topic(server.bootstrap, stream, len(acked), timeout=30)
    logged = {r.value.decode() for r in records}
    missing = [p for p in acked if p not in logged]
    assert not missing, f"{len(missing)} PUBACKed messages missing from the log: {missing[:5]}"
    assert "reconnect" in bridge.output() or "retry" in bridge.output()


@pytest.fixture(scope="module")
def small_bridge(request, module_server, tmp_path_factory) -> BridgeProcess:
    work = tmp_path_factory.mktemp("small-bridge")
    acl = work / "acl"
    acl.write_text("# anonymous clients: a chat room (routed between MQTT clients)\ntopic readwrite chat/#\n")
    b = BridgeProcess(module_server.bootstrap, work / "bridge.log", "--max-packet-size", "1024",
                      "--log-format", "text", "--acl-file", str(acl))
    request.addfinalizer(b.stop)
    b.start()
    return b


def raw_exchange(port: int, data: bytes, timeout: float = 5.0) -> bytes:
    """Send bytes, return everything the server sends until it closes the connection."""
    with socket.create_connection((HOST, port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                return out
            out += chunk
        raise AssertionError(f"server did not close the connection; got {out!r}")


def test_bad_input_closes_cleanly_and_bridge_keeps_serving(small_bridge) -> None:
    port = small_bridge.port

    async def bystander_roundtrip(c: MqttClient, n: int) -> None:
        await c.publish("chat/room", f"hello {n}".encode(), 1)
        p = await asyncio.wait_for(c.messages.get(), 60)  # a deadline, not a wait
        assert p.payload == f"hello {n}".encode()

    async def run() -> None:
        bystander = MqttClient("bystander", version=5)
        await bystander.connect(HOST, port)
        await bystander.subscribe("chat/#")
        await bystander_roundtrip(bystander, 0)

        # 1. garbage bytes
        assert await asyncio.to_thread(raw_exchange, port, b"\x00\x17garbage-garbage-garbage") == b""
        # 2. CONNECT with protocol level 9: CONNACK "unacceptable protocol version", then close
        bad = bytearray(encode(Connect("bad-level"), 4))
        bad[8] = 9
        assert await asyncio.to_thread(raw_exchange, port, bytes(bad)) == b"\x20\x02\x00\x01"
        # 3. PUBLISH to a topic with '#': v5 DISCONNECT "topic name invalid" (0x90); v3 close
        v5 = encode(Connect("wild5", 5), 5) + encode(Publish("a/#", b"x", 1, packet_id=1), 5)
        out = await asyncio.to_thread(raw_exchange, port, v5)
        connack, disconnect = out[:2 + out[1]], out[2 + out[1]:]
        assert connack[0] == 0x20 and connack[3] == 0x00, out  # CONNACK, success
        # then exactly one DISCONNECT (0xE0) with reason 0x90, and nothing else
        assert disconnect[0] == 0xE0 and len(disconnect) == 2 + disconnect[1], out
        assert disconnect[2] == 0x90, out
        v3 = encode(Connect("wild3", 4), 4) + encode(Publish("a/#", b"x", 0), 4)
        assert (await asyncio.to_thread(raw_exchange, port, v3)) == b"\x20\x02\x00\x00"
        # 4. oversized packet (limit 1024): v5 DISCONNECT "packet too large" (0x95)
        big = encode(Connect("big5", 5), 5) + encode(Publish("chat/x", b"x" * 5000, 0), 5)
        out = await asyncio.to_thread(raw_exchange, port, big)
        assert out[out.index(b"\xe0") + 2] == 0x95
        # 5. second CONNECT is a protocol error
        twice = encode(Connect("twice", 5), 5) * 2
        out = await asyncio.to_thread(raw_exchange, port, twice)
        assert out[out.index(b"\xe0") + 2] == 0x82

        await bystander_roundtrip(bystander, 1)
        fresh = MqttClient("fresh", version=4)
        assert (await fresh.connect(HOST, port)).reason == 0
        await fresh.disconnect()
        await bystander.disconnect()

    asyncio.run(run())
    out = subprocess.run(["mosquitto_pub", "-h", HOST, "-p", str(port), "-t", "chat/after",
                          "-m", "still serving", "-q", "1"], capture_output=True, timeout=20)
    assert out.returncode == 0


def test_keep_alive_enforced_at_one_and_a_half(small_bridge) -> None:
    async def run() -> float:
        c = MqttClient("sleepy", version=5)
        t0 = time.monotonic()  # before CONNECT: the bridge's 1.5 s start later than this
        await c.connect(HOST, small_bridge.port, keep_alive=1)
        await asyncio.wait_for(c.closed, 30)  # enforced at all (how promptly: not timed here)
        assert c.disconnect_packet is not None and c.disconnect_packet.reason == 0x8D
        return time.monotonic() - t0

    elapsed = asyncio.run(run())
    assert elapsed >= 1.5, f"closed after {elapsed:.2f}s, before one and a half keep-alives"


def test_credentials_file(request, tmp_path, module_server) -> None:
    creds = tmp_path / "passwd"
    hashed = subprocess.run(
        ["python", "-m", "mqtt_bridge", "--hash-password"], input="s3cret\n", capture_output=True,
        text=True, check=True, timeout=30,
    ).stdout.strip()
    creds.write_text(f"plain:pw\nhashed:{hashed}\n")
    bridge = start_bridge(request, tmp_path, module_server.bootstrap, "--credentials-file",
                          str(creds), "--no-anonymous")

    async def run() -> list[int]:
        codes = []
        for version, user, pw in ((4, "plain", b"pw"), (5, "hashed", b"s3cret"), (4, "plain", b"no"),
                                  (5, "hashed", b"no"), (4, None, None)):
            c = MqttClient(f"c{len(codes)}", version=version)
            ack = await c.connect(HOST, bridge.port, username=user, password=pw)
            codes.append(ack.reason)
            await c.disconnect()
        return codes

    assert asyncio.run(run()) == [0, 0, 4, 0x86, 4]
