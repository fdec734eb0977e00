"""MQTT security with real processes and real clients: logserver, mqtt-bridge, paho-mqtt
(3.1.1 and 5), Debian's mosquitto_pub/mosquitto_sub over TLS, a password file written by
Debian's mosquitto_passwd, certificates made at test time, kafka-python on the log side.

Every spoofing case of issue 11 is tried and must be refused with the MQTT reason code a
client sees (v5 CONNACK/SUBACK/PUBACK 0x86/0x87, v3.1.1 CONNACK 4/5 and SUBACK 0x80; a
v3.1.1 PUBACK cannot say no, so the bridge acknowledges and drops, as mosquitto does, and
the test checks that nothing arrived); each positive path must still work.
"""

from __future__ import annotations

import asyncio
import queue
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
import pytest
from helpers.mqtt_client import MqttClient
from helpers.mqtt_kafka import read_topic
from helpers.mqtt_procs import BridgeProcess, stats_lines, wait_for_counters
from helpers.tlscerts import CertAuthority, Pem
from kafka import KafkaConsumer, KafkaProducer

from commonlib.childproc import HOST, free_port
from mqtt_bridge.codec import Will

pytestmark = pytest.mark.timeout(180)

USERS = {"dev-a": "pass-a", "dev-b": "pass-b", "ops": "pass-ops"}
NOT_AUTHORIZED, BAD_CREDENTIALS = 0x87, 0x86


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Any]:
    ca = CertAuthority(tmp_path_factory.mktemp("pki"))
    return {
        "ca": ca.pem.cert,
        "server": ca.issue("127.0.0.1", server=True),
        "dev-c": ca.issue("dev-c"),
        "dev-d": ca.issue("dev-d"),
        "dev-c-expired": ca.issue("dev-c", expired=True),
        "dev-c-foreign": CertAuthority(tmp_path_factory.mktemp("other-pki"), "other-ca").issue("dev-c"),
    }


@pytest.fixture(scope="module")
def passwd(tmp_path_factory) -> Path:
    """Written by Debian's mosquitto_passwd (PBKDF2-SHA512, ``$7$``)."""
    path = tmp_path_factory.mktemp("passwd") / "passwd"
    for i, (user, pw) in enumerate(USERS.items()):
        subprocess.run(["mosquitto_passwd", *(["-c"] if i == 0 else []), "-b", str(path), user, pw],
                       check=True, timeout=20)
    assert all(line.split(":", 1)[1].startswith("$7$") for line in path.read_text().split())
    return path


def _start(request, b: BridgeProcess) -> BridgeProcess:
    request.addfinalizer(b.stop)
    b.start()
    return b


@pytest.fixture(scope="module")
def secure_bridge(request, module_server, tmp_path_factory, pki, passwd) -> BridgeProcess:
    """Passwords on both listeners, TLS on ``tls_port``, the default device binding."""
    work = tmp_path_factory.mktemp("secure-bridge")
    tls_port = free_port()
    b = BridgeProcess(
        module_server.bootstrap, work / "bridge.log", "--log-format", "json",
        "--credentials-file", str(passwd), "--tls-listen", f"{HOST}:{tls_port}",
        "--tls-certfile", str(pki["server"].cert), "--tls-keyfile", str(pki["server"].key),
    )
    b.tls_port = tls_port  # type: ignore[attr-defined]  # test-side note of the chosen port
    return _start(request, b)


@pytest.fixture(scope="module")
def cert_bridge(request, module_server, tmp_path_factory, pki, passwd) -> BridgeProcess:
    """TLS with required client certificates whose CN is the identity."""
    work = tmp_path_factory.mktemp("cert-bridge")
    tls_port = free_port()
    b = BridgeProcess(
        module_server.bootstrap, work / "bridge.log", "--log-format", "text",
        "--credentials-file", str(passwd), "--tls-listen", f"{HOST}:{tls_port}",
        "--tls-certfile", str(pki["server"].cert), "--tls-keyfile", str(pki["server"].key),
        "--tls-cafile", str(pki["ca"]), "--require-certificate", "--use-identity-as-username",
    )
    b.tls_port = tls_port  # type: ignore[attr-defined]
    return _start(request, b)


class Dev:
    """A paho client with blocking helpers that return the reason codes it received."""

    def __init__(self, cid: str, version: int, *, tls: Pem | None = None, ca: Path | None = None) -> None:
        self.version = version
        proto = paho.MQTTv5 if version == 5 else paho.MQTTv311
        self.c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=cid, protocol=proto)
        if ca is not None:
            self.c.tls_set(ca_certs=str(ca), certfile=str(tls.cert) if tls else None,
                           keyfile=str(tls.key) if tls else None)
        self.connacks: queue.Queue[int] = queue.Queue()
        self.subacks: dict[int, list[int]] = {}
        self.pubacks: dict[int, int] = {}
        self.messages: list[tuple[str, bytes]] = []
        self.disconnected = threading.Event()
        self.acked = threading.Condition()
        self.c.on_connect = lambda c, u, f, rc, p: self.connacks.put(rc.value)
        self.c.on_disconnect = lambda c, u, f, rc, p: self.disconnected.set()
        self.c.on_message = lambda c, u, m: self.messages.append((m.topic, m.payload))

        def on_subscribe(c, u, mid, codes, props) -> None:
            with self.acked:
                self.subacks[mid] = [rc.value for rc in codes]
                self.acked.notify_all()

        def on_publish(c, u, mid, rc, props) -> None:
            with self.acked:
                self.pubacks[mid] = rc.value
                self.acked.notify_all()

        self.c.on_subscribe = on_subscribe
        self.c.on_publish = on_publish

    def connect(self, port: int, user: str | None = None, password: str | None = None,
                will: tuple[str, bytes] | None = None) -> int:
        if user is not None:
            self.c.username_pw_set(user, password)
        if will is not None:
            self.c.will_set(will[0], will[1], qos=1)
        self.c.connect(HOST, port, keepalive=30)
        self.c.loop_start()
        rc = self.connacks.get(timeout=15)
        if rc != 0:
            self.close()  # paho would retry the refused CONNECT
        return rc

    def _wait(self, table: dict[int, Any], mid: int) -> Any:
        with self.acked:
            assert self.acked.wait_for(lambda: mid in table, timeout=15), f"no ack for mid {mid}"
            return table[mid]

    def subscribe(self, topic_filter: str) -> int:
        _, mid = self.c.subscribe(topic_filter, qos=1)
        return self._wait(self.subacks, mid)[0]

    def publish(self, topic: str, payload: bytes, qos: int = 1) -> int:
        info = self.c.publish(topic, payload, qos=qos)
        if qos == 0:
            info.wait_for_publish(timeout=15)
            return 0
        return self._wait(self.pubacks, info.mid)

    def wait_for(self, pred, timeout: float = 15) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred():
                return True
            time.sleep(0.05)
        return pred()

    def close(self) -> None:
        self.c.disconnect()
        self.c.loop_stop()


def produce(bootstrap: str, topic: str, key: bytes | None, value: bytes) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap)
    p.send(topic, key=key, value=value)
    p.flush()
    p.close()


def topic_values(bootstrap: str, topic: str) -> list[bytes]:
    """Every value now in ``topic`` (empty if it does not exist), without creating it."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             allow_auto_create_topics=False)
    try:
        if topic not in consumer.topics():
            return []
    finally:
        consumer.close()
    return [r.value for r in read_topic(bootstrap, topic, 1 << 30, timeout=3)]


def existing_topics(bootstrap: str) -> set[str]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, allow_auto_create_topics=False)
    try:
        return set(consumer.topics())
    finally:
        consumer.close()


@pytest.mark.parametrize("version", [4, 5])
def test_spoofing_refused_and_own_paths_work(secure_bridge, module_server, version: int) -> None:
    bootstrap = module_server.bootstrap
    port = secure_bridge.port
    before = stats_lines(secure_bridge)[-1:] or [{}]
    tag = f"v{version}-{uuid.uuid4().hex[:6]}".encode()
    denied_sub = NOT_AUTHORIZED if version == 5 else 0x80
    denied_pub = NOT_AUTHORIZED if version == 5 else 0  # 3.1.1: positive ack, dropped
    a, b = Dev("dev-a", version), Dev("dev-b", version)
    spoofers: list[Dev] = []
    try:
        assert a.connect(port, "dev-a", "pass-a") == 0
        assert b.connect(port, "dev-b", "pass-b") == 0
        # subscriptions: everything, every device's commands, another device's commands
        for flt in ("#", "devices/+/commands", "devices/dev-b/commands", "devices/#",
                    "$share/g/devices/+/commands"):
            assert a.subscribe(flt) == denied_sub, flt
        assert a.subscribe("devices/dev-a/commands") == 1
        assert a.subscribe("ota") == 1
        assert b.subscribe("devices/dev-b/commands") == 1

        new_stream = "stream" + uuid.uuid4().hex[:8]
        spoofs = {
            "devices/dev-b/commands": b"spoof-cmd-to-b",     # into the victim's downlink
            "devices/dev-a/commands": b"spoof-cmd-to-self",  # the downlink comes from the log
            "ota": b"spoof-ota",                             # broadcast to every device
            "devices/dev-b/telemetry": b"spoof-telemetry",   # as another device
            "devices/dev-a/__mqtt_bridge_sessions": b"spoof-session",  # the session topic
            "devices/dev-a/__consumer_offsets": b"spoof-internal",
            f"devices/dev-a/{new_stream}": b"spoof-new-stream",  # a topic outside the list
        }
        for topic, payload in spoofs.items():
            for qos in (1, 0):
                got = a.publish(topic, payload + tag + b"-q%d" % qos, qos)
                if qos:
                    assert got == denied_pub, topic
        # own telemetry: accepted and in the log
        assert a.publish("devices/dev-a/telemetry", b"own-telemetry-" + tag) == 0

        # a client id belongs to its identity: dev-b may not take over dev-a
        thief = Dev("dev-a", version)
        spoofers.append(thief)
        assert thief.connect(port, "dev-b", "pass-b") == NOT_AUTHORIZED
        # dev-b under another client id gets no device topics (id must equal the identity)
        alias = Dev("dev-b-2", version)
        spoofers.append(alias)
        assert alias.connect(port, "dev-b", "pass-b") == 0
        assert alias.publish("devices/dev-b-2/telemetry", b"alias-" + tag) == denied_pub
        assert alias.subscribe("devices/dev-b-2/commands") == denied_sub
        # a will on another device's topic
        will = Dev("dev-b", version)
        spoofers.append(will)
        assert will.connect(port, "dev-b", "pass-b", will=("devices/dev-a/telemetry", b"w")) == NOT_AUTHORIZED
        # bad password
        assert Dev("dev-a", version).connect(port, "dev-a", "wrong") == BAD_CREDENTIALS

        # the first dev-a connection stayed and still works
        assert not a.disconnected.is_set()
        assert a.publish("devices/dev-a/telemetry", b"own-again-" + tag) == 0

        # own commands and broadcasts delivered (same key = same partition, so a spoofed
        # command, had it been logged, would arrive before these)
        produce(bootstrap, "commands", b"dev-a", b"cmd-a-" + tag)
        produce(bootstrap, "commands", b"dev-b", b"cmd-b-" + tag)
        produce(bootstrap, "ota", None, b"ota-" + tag)
        assert a.wait_for(lambda: len(a.messages) >= 2)
        assert b.wait_for(lambda: len(b.messages) >= 1)
        time.sleep(0.3)  # nothing extra may arrive
        assert sorted(a.messages) == sorted([("devices/dev-a/commands", b"cmd-a-" + tag),
                                             ("ota", b"ota-" + tag)])
        assert b.messages == [("devices/dev-b/commands", b"cmd-b-" + tag)]
    finally:
        for d in (a, b, *spoofers):
            d.close()

    telemetry = [r.value for r in read_topic(bootstrap, "telemetry", 2)]
    assert b"own-telemetry-" + tag in telemetry and b"own-again-" + tag in telemetry
    logged = [v for t in ("telemetry", "commands", "ota", "__mqtt_bridge_sessions")
              for v in topic_values(bootstrap, t)]
    leaked = [v for v in logged if v is not None and tag in v and v.startswith((b"spoof", b"alias", b"w"))]
    assert leaked == []
    assert new_stream not in existing_topics(bootstrap)
    out = secure_bridge.output()
    assert "not authorized: publish" in out and "belongs to another identity" in out
    # every refusal counted, QoS 0 ones included: 7 topics x 2 QoS + the alias; 5 + 1 filters;
    # the thief, the will and the bad password at CONNECT
    base = before[0]
    wait_for_counters(secure_bridge, {
        "denied_publish": base.get("denied_publish", 0) + 15,
        "denied_subscribe": base.get("denied_subscribe", 0) + 6,
        "denied_connect": base.get("denied_connect", 0) + 3,
    })


def test_v311_connack_return_codes(secure_bridge) -> None:
    """The raw 3.1.1 CONNACK return codes: 4 bad credentials, 5 not authorized."""

    async def run() -> list[int]:
        holder = MqttClient("dev-a", version=4)
        assert (await holder.connect(HOST, secure_bridge.port, username="dev-a", password=b"pass-a")).reason == 0
        codes = []
        for user, pw in (("dev-a", b"nope"), ("nobody", b"pass-a"), ("dev-b", b"pass-b")):
            c = MqttClient("dev-a", version=4)
            codes.append((await c.connect(HOST, secure_bridge.port, username=user, password=pw)).reason)
        w = MqttClient("dev-b", version=4)
        ack = await w.connect(HOST, secure_bridge.port, username="dev-b", password=b"pass-b",
                              will=Will("ota", b"x", 1))
        codes.append(ack.reason)
        assert not holder.closed.done()
        await holder.disconnect()
        return codes

    assert asyncio.run(run()) == [4, 4, 5, 5]


def test_mosquitto_clients_with_tls_and_passwords(secure_bridge, module_server, pki) -> None:
    bootstrap = module_server.bootstrap
    tls = ["-h", HOST, "-p", str(secure_bridge.tls_port), "--cafile", str(pki["ca"])]
    tag = uuid.uuid4().hex[:8]
    for v in ("mqttv311", "mqttv5"):
        out = subprocess.run(["mosquitto_pub", *tls, "-V", v, "-q", "1", "-i", "dev-a", "-u", "dev-a",
                              "-P", "pass-a", "-t", "devices/dev-a/telemetry", "-m", f"tls-{v}-{tag}"],
                             capture_output=True, text=True, timeout=20)
        assert out.returncode == 0, out.stderr
        bad = subprocess.run(["mosquitto_pub", *tls, "-V", v, "-q", "1", "-i", "dev-a", "-u", "dev-a",
                              "-P", "wrong", "-t", "devices/dev-a/telemetry", "-m", f"bad-{tag}"],
                             capture_output=True, text=True, timeout=20)
        assert bad.returncode != 0 and "bad user name or password" in bad.stderr.lower(), bad.stderr
    # plain text to the TLS port is not MQTT
    plain = subprocess.run(["mosquitto_pub", "-h", HOST, "-p", str(secure_bridge.tls_port), "-q", "1",
                            "-i", "dev-a", "-u", "dev-a", "-P", "pass-a", "-t", "devices/dev-a/telemetry",
                            "-m", f"plain-{tag}"], capture_output=True, text=True, timeout=20)
    assert plain.returncode != 0
    values = [r.value for r in read_topic(bootstrap, "telemetry", 2)]
    assert f"tls-mqttv311-{tag}".encode() in values and f"tls-mqttv5-{tag}".encode() in values
    assert not any(v.endswith(tag.encode()) and v.startswith((b"bad", b"plain")) for v in values)

    # mosquitto_sub over TLS gets its own command (produced until it has one)
    sub = subprocess.Popen(["mosquitto_sub", *tls, "-V", "mqttv5", "-i", "dev-b", "-u", "dev-b",
                            "-P", "pass-b", "-t", "devices/dev-b/commands", "-q", "1", "-C", "1",
                            "-W", "30"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while sub.poll() is None and time.monotonic() < deadline:
            produce(bootstrap, "commands", b"dev-b", f"cmd-{tag}".encode())
            time.sleep(0.2)
        out, err = sub.communicate(timeout=10)
    finally:
        sub.kill()
    assert sub.returncode == 0, err
    assert out.strip() == f"cmd-{tag}"
    # a denied subscription, as mosquitto_sub reports it
    denied = subprocess.run(["mosquitto_sub", *tls, "-V", "mqttv5", "-i", "dev-b", "-u", "dev-b",
                             "-P", "pass-b", "-t", "devices/+/commands", "-C", "1", "-W", "5"],
                            capture_output=True, text=True, timeout=20)
    assert "All subscription requests were denied" in denied.stderr, denied.stderr


def test_client_certificates_are_identities(cert_bridge, module_server, pki) -> None:
    bootstrap = module_server.bootstrap
    port = cert_bridge.tls_port
    tag = uuid.uuid4().hex[:8].encode()
    c = Dev("dev-c", 5, tls=pki["dev-c"], ca=pki["ca"])
    spoofers: list[Dev] = []
    try:
        assert c.connect(port) == 0  # no password: the certificate is the identity
        assert c.publish("devices/dev-c/telemetry", b"cert-" + tag) == 0
        assert c.subscribe("devices/dev-c/commands") == 1
        # the certificate of dev-d cannot take over dev-c, nor publish as dev-c
        d = Dev("dev-c", 5, tls=pki["dev-d"], ca=pki["ca"])
        spoofers.append(d)
        assert d.connect(port) == NOT_AUTHORIZED
        d3 = Dev("dev-c", 4, tls=pki["dev-d"], ca=pki["ca"])
        spoofers.append(d3)
        assert d3.connect(port) == NOT_AUTHORIZED  # paho reports 3.1.1 return code 5 as 0x87
        e = Dev("dev-e", 5, tls=pki["dev-d"], ca=pki["ca"])
        spoofers.append(e)
        assert e.connect(port) == 0
        assert e.publish("devices/dev-c/telemetry", b"spoof-" + tag) == NOT_AUTHORIZED
        assert e.publish("devices/dev-e/telemetry", b"spoof-e-" + tag) == NOT_AUTHORIZED  # CN dev-d
        assert not c.disconnected.is_set()
        produce(bootstrap, "commands", b"dev-c", b"cmd-c-" + tag)
        assert c.wait_for(lambda: c.messages)
        assert c.messages == [("devices/dev-c/commands", b"cmd-c-" + tag)]
    finally:
        for x in (c, *spoofers):
            x.close()
    tls = ["-h", HOST, "-p", str(port), "--cafile", str(pki["ca"]), "-q", "1", "-V", "mqttv5"]
    ok = subprocess.run(["mosquitto_pub", *tls, "--cert", str(pki["dev-c"].cert), "--key",
                         str(pki["dev-c"].key), "-i", "dev-c", "-t", "devices/dev-c/telemetry",
                         "-m", f"mosq-cert-{tag.decode()}"], capture_output=True, text=True, timeout=20)
    assert ok.returncode == 0, ok.stderr
    for extra in ([], *(["--cert", str(pki[k].cert), "--key", str(pki[k].key)]
                        for k in ("dev-c-expired", "dev-c-foreign"))):
        refused = subprocess.run(["mosquitto_pub", *tls, *extra, "-i", "dev-c", "-t",
                                  "devices/dev-c/telemetry", "-m", f"refused-{tag.decode()}"],
                                 capture_output=True, text=True, timeout=20)
        # TLS 1.3: the server's alert arrives after the client's handshake, as a lost connection
        err = refused.stderr.lower()
        assert refused.returncode != 0 and ("connection was lost" in err or "tls" in err), (extra, err)
    values = [r.value for r in read_topic(bootstrap, "telemetry", 1)]
    assert b"cert-" + tag in values and b"mosq-cert-" + tag in values
    assert not any(tag in v and v.startswith((b"spoof", b"refused")) for v in values)


def test_acl_file_decides(request, module_server, tmp_path, passwd) -> None:
    """With an ACL file (mosquitto's format) the file decides; the downlink and the
    uplink topic list still hold."""
    acl = tmp_path / "acl"
    acl.write_text(
        "user ops\ntopic read devices/+/commands\ntopic readwrite ops/#\n"
        "pattern write devices/%u/#\npattern read devices/%u/commands\n"
    )
    b = _start(request, BridgeProcess(module_server.bootstrap, tmp_path / "bridge.log", "--log-format",
                                      "text", "--credentials-file", str(passwd), "--acl-file", str(acl)))
    tag = uuid.uuid4().hex[:8].encode()
    ops, dev = Dev("console", 5), Dev("dev-a", 5)
    try:
        assert ops.connect(b.port, "ops", "pass-ops") == 0
        assert dev.connect(b.port, "dev-a", "pass-a") == 0
        assert ops.subscribe("devices/+/commands") == 1
        assert ops.subscribe("ops/#") == 1
        assert dev.subscribe("devices/+/commands") == NOT_AUTHORIZED
        assert dev.subscribe("ota") == NOT_AUTHORIZED  # not in the file
        assert dev.subscribe("devices/dev-a/commands") == 1
        assert dev.publish("devices/dev-a/telemetry", b"acl-" + tag) == 0
        assert dev.publish("devices/dev-b/telemetry", b"spoof-" + tag) == NOT_AUTHORIZED
        # granted by "devices/%u/#", still refused: the downlink is written by the log only
        assert dev.publish("devices/dev-a/commands", b"spoof-cmd-" + tag) == NOT_AUTHORIZED
        # granted, but not an allowed uplink topic
        assert dev.publish("devices/dev-a/brandnew", b"spoof-new-" + tag) == NOT_AUTHORIZED
        assert ops.publish("ops/notes", b"note-" + tag) == 0  # routed between MQTT clients
        produce(module_server.bootstrap, "commands", b"dev-a", b"cmd-" + tag)
        assert ops.wait_for(lambda: len(ops.messages) >= 2)
        assert dev.wait_for(lambda: dev.messages)
        assert sorted(ops.messages) == [("devices/dev-a/commands", b"cmd-" + tag), ("ops/notes", b"note-" + tag)]
        assert dev.messages == [("devices/dev-a/commands", b"cmd-" + tag)]
    finally:
        ops.close()
        dev.close()
    assert "brandnew" not in existing_topics(module_server.bootstrap)
    values = [r.value for r in read_topic(module_server.bootstrap, "telemetry", 1)]
    assert b"acl-" + tag in values and b"spoof-" + tag not in values


def test_same_identity_takes_over_and_offline_sessions_keep_their_owner(secure_bridge) -> None:
    port = secure_bridge.port

    async def run() -> None:
        first = MqttClient("dev-a", version=5)
        assert (await first.connect(HOST, port, username="dev-a", password=b"pass-a")).reason == 0
        second = MqttClient("dev-a", version=5)
        assert (await second.connect(HOST, port, username="dev-a", password=b"pass-a")).reason == 0
        await asyncio.wait_for(first.closed, 10)
        assert first.disconnect_packet is not None and first.disconnect_packet.reason == 0x8E
        await second.disconnect()
        # a persistent session, now offline, still belongs to dev-b
        owner = MqttClient("dev-b", version=4)
        ack = await owner.connect(HOST, port, username="dev-b", password=b"pass-b", clean=False)
        assert ack.reason == 0
        await owner.disconnect()
        thief = MqttClient("dev-b", version=4)
        ack = await thief.connect(HOST, port, username="dev-a", password=b"pass-a", clean=False)
        assert ack.reason == 5
        back = MqttClient("dev-b", version=4)
        ack = await back.connect(HOST, port, username="dev-b", password=b"pass-b", clean=True)
        assert ack.reason == 0
        await back.disconnect()

    asyncio.run(run())
