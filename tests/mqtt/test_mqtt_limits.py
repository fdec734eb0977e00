"""Bounded bridge state: retained messages (count and bytes, also when loaded from the
log), sessions, and each session's outgoing queue. Every refusal has its reason code
(v5 0x97 Quota exceeded; 3.1.1 CONNACK 3) and is logged and counted in the stats line.

A real logserver per module, a bridge per test (its own retained and session topics),
driven by the asyncio MQTT client of tests/helpers and kafka-python; every process is
stopped by pid in the finalizers.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.mqtt_client import MqttClient
from helpers.mqtt_procs import BridgeProcess, wait_for_counters
from kafka import KafkaProducer

from commonlib.childproc import HOST
from mqtt_bridge.codec import Connect, PacketReader, PacketType, Pingreq, Publish, Reason, encode

pytestmark = pytest.mark.timeout(120)

QUOTA = int(Reason.QUOTA_EXCEEDED)


@pytest.fixture
def make_bridge(request, module_server, tmp_path) -> Callable[..., BridgeProcess]:
    """``make_bridge(*flags, retained_topic=None)``: a bridge with JSON logs, site/# open."""
    acl = tmp_path / "acl"
    acl.write_text("topic readwrite site/#\n")
    n = 0

    def make(*flags: str, retained_topic: str | None = None, acl_file: bool = True) -> BridgeProcess:
        nonlocal n
        n += 1
        args = ["--log-format", "json",
                "--retained-topic", retained_topic or "__retained_" + uuid.uuid4().hex[:8],
                "--session-topic", "__sessions_" + uuid.uuid4().hex[:8], *flags]
        if acl_file:
            args += ["--acl-file", str(acl)]
        b = BridgeProcess(module_server.bootstrap, Path(tmp_path) / f"bridge{n}.log", *args)
        request.addfinalizer(b.stop)
        b.start()
        return b

    return make


async def client(bridge: BridgeProcess, cid: str, version: int = 5, **connect) -> MqttClient:
    c = MqttClient(cid, version=version)
    connack = await c.connect(HOST, bridge.port, **connect)
    assert connack.reason == 0, connack
    return c


async def retained_topics(bridge: BridgeProcess, cid: str) -> dict[str, bytes]:
    """What a new subscriber to site/# is sent as retained; a live marker published after
    the SUBACK ends the list (retained messages are queued at subscribe time, before it)."""
    c = await client(bridge, cid)
    try:
        assert await c.subscribe("site/#", qos=1) == [1]
        marker = "site/marker-" + cid
        c.publish(marker, b"end", qos=0)
        got: dict[str, bytes] = {}
        assert c.messages is not None
        while True:
            p = await asyncio.wait_for(c.messages.get(), 10)
            if p.topic == marker:
                return got
            assert p.retain, p
            got[p.topic] = p.payload
    finally:
        await c.disconnect()


async def puback(c: MqttClient, topic: str, payload: bytes, retain: bool = True) -> int:
    fut = c.publish(topic, payload, qos=1, retain=retain)
    assert fut is not None
    return int((await asyncio.wait_for(fut, 10)).reason)


def test_retained_message_count_limit(make_bridge) -> None:
    bridge = make_bridge("--max-retained-messages", "3")

    async def run() -> None:
        c = await client(bridge, "ret-v5")
        assert [await puback(c, f"site/{t}", t.encode()) for t in "abc"] == [0, 0, 0]
        assert await puback(c, "site/d", b"d") == QUOTA  # a fourth topic: refused, not written
        q2 = c.publish("site/q2", b"q2", qos=2, retain=True)  # PUBREC 0x97 (the client ends it)
        assert q2 is not None
        await asyncio.wait_for(q2, 10)
        assert await puback(c, "site/a", b"a2") == 0  # replacing is not growing
        assert await puback(c, "site/b", b"") == 0  # deleting always works ...
        assert await puback(c, "site/d", b"d") == 0  # ... and makes room
        # 3.1.1 has no negative PUBACK: delivered to subscribers, acknowledged, not retained
        live = await client(bridge, "live-sub")
        assert await live.subscribe("site/e", qos=1) == [1]
        old = await client(bridge, "ret-v3", version=4)
        assert await puback(old, "site/e", b"e") == 0
        assert live.messages is not None
        got = await asyncio.wait_for(live.messages.get(), 10)
        assert (got.topic, got.payload) == ("site/e", b"e")
        assert await retained_topics(bridge, "reader") == {"site/a": b"a2", "site/c": b"c", "site/d": b"d"}
        for x in (c, live, old):
            await x.disconnect()

    asyncio.run(run())
    stats = wait_for_counters(bridge, {"retained_refused": 3, "retained_messages": 3})
    assert stats["retained_refused"] == 3, stats
    assert "limit of 3 messages" in bridge.output()


def test_retained_bytes_limit(make_bridge) -> None:
    bridge = make_bridge("--max-retained-bytes", "100")  # topic + payload bytes

    async def run() -> None:
        c = await client(bridge, "ret-bytes")
        assert await puback(c, "site/x", b"x" * 60) == 0  # 66 bytes
        assert await puback(c, "site/y", b"y" * 60) == QUOTA  # 132 > 100
        assert await puback(c, "site/x", b"x" * 94) == 0  # 100: the replacement fits
        assert await puback(c, "site/x", b"x" * 95) == QUOTA  # 101
        assert await puback(c, "site/y", b"not retained", retain=False) == 0  # limits only retain
        await c.disconnect()
        assert await retained_topics(bridge, "reader") == {"site/x": b"x" * 94}

    asyncio.run(run())
    stats = wait_for_counters(bridge, {"retained_refused": 2, "retained_bytes": 100})
    assert stats["retained_refused"] == 2 and stats["retained_messages"] == 1, stats


def test_retained_limit_applies_to_what_is_loaded_from_the_log(make_bridge) -> None:
    """Another bridge (no limit) filled the shared retained topic; a bridge with a limit
    of 2 keeps 2 at start-up and counts the rest."""
    topic = "__retained_" + uuid.uuid4().hex[:8]
    writer = make_bridge(retained_topic=topic)

    async def fill() -> None:
        c = await client(writer, "filler")
        assert [await puback(c, f"site/{i}", b"v") for i in range(5)] == [0] * 5
        await c.disconnect()

    asyncio.run(fill())
    writer.stop()
    bounded = make_bridge("--max-retained-messages", "2", retained_topic=topic)
    stats = wait_for_counters(bounded, {"retained_refused": 3, "retained_messages": 2})
    assert stats["retained_messages"] == 2, stats
    assert len(asyncio.run(retained_topics(bounded, "reader"))) == 2


def test_session_limit(make_bridge) -> None:
    bridge = make_bridge("--max-sessions", "2")

    async def run() -> None:
        keep = {"clean": False, "properties": {"session_expiry_interval": 300}}
        one = await client(bridge, "s1", **keep)
        two = await client(bridge, "s2")
        third = MqttClient("s3", version=5)
        refused = await third.connect(HOST, bridge.port)
        assert refused.reason == QUOTA and "session limit" in refused.properties.get("reason_string", "")
        await one.disconnect()  # s1 stays as an offline session: still counted
        third = MqttClient("s3b", version=4)
        assert (await third.connect(HOST, bridge.port)).reason == 3  # 3.1.1: server unavailable
        back = MqttClient("s1", version=5)
        again = await back.connect(HOST, bridge.port, **keep)  # an existing session is welcome
        assert again.reason == 0 and again.session_present
        await two.disconnect()  # a clean session ends with its connection: room again
        for _ in range(100):
            late = MqttClient("s4", version=5)
            ack = await late.connect(HOST, bridge.port)
            if ack.reason == 0:
                break
            await asyncio.sleep(0.05)  # the bridge ends s2's session when the socket closes
        assert ack.reason == 0
        await late.disconnect()
        await back.disconnect()

    asyncio.run(run())
    wait_for_counters(bridge, {"refused_sessions": 2})
    assert "session limit 2 reached" in bridge.output()


def test_queue_limit_drops_are_counted(make_bridge, module_server) -> None:
    """A client that stops acknowledging: one message in flight, 5 queued, the rest dropped."""
    bridge = make_bridge("--max-queued", "5", "--max-inflight", "1", acl_file=False)

    async def run() -> None:
        c = MqttClient("slow-1", version=5, auto_ack=False)
        assert (await c.connect(HOST, bridge.port, properties={"receive_maximum": 1})).reason == 0
        assert await c.subscribe("devices/slow-1/commands", qos=1) == [1]
        producer = KafkaProducer(bootstrap_servers=module_server.bootstrap)
        for i in range(30):
            producer.send("commands", key=b"slow-1", value=f"cmd {i}".encode())
        producer.flush()
        producer.close()
        assert c.messages is not None
        first = await asyncio.wait_for(c.messages.get(), 10)
        assert first.payload == b"cmd 0"
        stats = await asyncio.to_thread(wait_for_counters, bridge, {"queued_dropped": 24})
        # 30 = 5 queued + 1 in flight (when it left the queue before the rest arrived) + dropped
        assert stats["queued_dropped"] in (24, 25), stats
        assert c.messages.empty()  # nothing more while the first is unacknowledged
        await c.disconnect()

    asyncio.run(run())
    assert "queue full (5)" in bridge.output()


def test_topic_levels_limit(make_bridge) -> None:
    bridge = make_bridge("--max-topic-levels", "4")

    async def run() -> None:
        c = await client(bridge, "levels-v5")
        assert await c.subscribe("site/a/b/c", "site/a/b/c/d", "site/+/+/+/#", qos=1) == [
            1, int(Reason.TOPIC_FILTER_INVALID), int(Reason.TOPIC_FILTER_INVALID)]
        old = await client(bridge, "levels-v3", version=4)
        assert await old.subscribe("site/a/b/c/d", qos=1) == [0x80]
        await old.disconnect()
        assert await puback(c, "site/a/b/c", b"4 levels", retain=False) == 0
        c.publish("site/a/b/c/d", b"5 levels", qos=1)
        assert c.closed is not None
        await asyncio.wait_for(c.closed, 10)
        assert c.disconnect_packet is not None
        assert c.disconnect_packet.reason == Reason.TOPIC_NAME_INVALID

    asyncio.run(run())
    wait_for_counters(bridge, {"topic_levels_refused": 4})
    assert "topic name has more than 4 levels" in bridge.output()


@pytest.mark.parametrize("version", [5, 4])
def test_bytes_before_connack_limit(make_bridge, version) -> None:
    """Bytes sent after CONNECT before the CONNACK are bounded too (else up to
    max-packets-before-connack x max-packet-size were held): CONNECT and five 40 KB
    PUBLISHes in one write, limit 64 KiB: CONNACK, then the connection closes (v5:
    DISCONNECT 0x97); one such PUBLISH is within the limit."""
    bridge = make_bridge("--max-bytes-before-connack", "65536")

    def burst(cid: str, n: int) -> list:
        data = encode(Connect(cid, version, True, 30), version) + b"".join(
            encode(Publish("site/burst", b"x" * 40_000, 0), version) for _ in range(n))
        reader = PacketReader(version=version)
        got: list = []
        with socket.create_connection((HOST, bridge.port), timeout=10) as s:
            s.sendall(data + encode(Pingreq(), version))
            while True:
                try:
                    chunk = s.recv(65536)
                except ConnectionResetError:
                    return got
                if not chunk:
                    return got
                got.extend(reader.feed(chunk))
                if any(p.type == PacketType.PINGRESP for p in got):
                    return got

    ok = burst(f"bytes-within-{version}", 1)
    assert [p.type for p in ok] == [PacketType.CONNACK, PacketType.PINGRESP]
    got = burst(f"bytes-burst-{version}", 5)
    assert got[0].type == PacketType.CONNACK and got[0].reason == 0
    if version == 5:
        assert [(p.type, p.reason) for p in got[1:]] == [(PacketType.DISCONNECT, QUOTA)]
    else:
        assert got[1:] == []  # 3.1.1: closed without a word
    wait_for_counters(bridge, {"early_overflows": 1})
    assert "more than 65536 bytes before CONNACK" in bridge.output()


@pytest.mark.parametrize("version", [5, 4])
def test_packets_before_connack_limit(make_bridge, version) -> None:
    """CONNECT and 30 PUBLISHes in one write, limit 10: CONNACK, then the connection
    closes (v5: DISCONNECT 0x97); a client within the limit is served normally."""
    bridge = make_bridge("--max-packets-before-connack", "10")

    def burst(cid: str, n: int) -> list:
        data = encode(Connect(cid, version, True, 30), version) + b"".join(
            encode(Publish("site/burst", b"x", 0), version) for _ in range(n))
        reader = PacketReader(version=version)
        got: list = []
        with socket.create_connection((HOST, bridge.port), timeout=10) as s:
            s.sendall(data + (encode(Pingreq(), version) if n <= 10 else b""))
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return got
                got.extend(reader.feed(chunk))
                if any(p.type == PacketType.PINGRESP for p in got):
                    return got

    ok = burst(f"within-{version}", 9)  # + the PINGREQ = 10
    assert [p.type for p in ok] == [PacketType.CONNACK, PacketType.PINGRESP]
    got = burst(f"burst-{version}", 30)
    assert got[0].type == PacketType.CONNACK and got[0].reason == 0
    if version == 5:
        assert [(p.type, p.reason) for p in got[1:]] == [(PacketType.DISCONNECT, QUOTA)]
    else:
        assert got[1:] == []  # 3.1.1: closed without a word
    wait_for_counters(bridge, {"early_overflows": 1})
    assert "more than 10 packets before CONNACK" in bridge.output()
