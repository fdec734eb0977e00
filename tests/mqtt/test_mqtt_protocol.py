"""MQTT 5 / 3.1.1 items checked against the OASIS specifications, with real processes
(logserver, mqtt-bridge) and real clients (paho-mqtt 3.1.1 and 5, mosquitto_sub, a
raw-socket client that sees every packet):

- shared subscriptions ``$share/{group}/{filter}`` (MQTT 5 section 4.8.2, and for 3.1.1
  clients as mosquitto offers them): each message to exactly one member, the member's
  maximum QoS, no retained messages on subscribe, a leaving member's messages to the
  others, Shared Subscription Available in the CONNACK, no-local a protocol error,
  bad share names refused;
- server-assigned client identifiers (MQTT 5 3.1.3.1 / 3.2.2.3.7; 3.1.1 3.1.3.1);
- request/response (MQTT 5 4.10): response topic and correlation data across the log
  as record headers, and between MQTT clients unchanged.
"""

from __future__ import annotations

import socket
import subprocess
import threading

import paho.mqtt.client as paho
import pytest
from helpers.mqtt_kafka import log_records
from helpers.mqtt_procs import HOST, BridgeProcess, mosquitto_pub
from helpers.mqtt_raw import Raw
from helpers.waiting import wait_until
from kafka import KafkaProducer
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

from mqtt_bridge.codec import (
    MQTT_5,
    Ack,
    Connack,
    Connect,
    Disconnect,
    PacketType,
    Publish,
    Suback,
    SubOptions,
    Subscribe,
    Will,
    encode,
)

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def bridge(request, module_server, tmp_path_factory) -> BridgeProcess:
    work = tmp_path_factory.mktemp("protocol-bridge")
    acl = work / "acl"
    acl.write_text("topic readwrite jobs/#\ntopic readwrite rr/#\npattern readwrite devices/%c/#\n")
    b = BridgeProcess(module_server.bootstrap, work / "bridge.log", "--log-format", "text",
                      "--acl-file", str(acl))
    request.addfinalizer(b.stop)
    b.start()
    return b


class Member:
    """A paho client (3.1.1 or 5) that records what it receives."""

    def __init__(self, request, port: int, cid: str, version: int) -> None:
        self.got: list[paho.MQTTMessage] = []
        self.connack_props: Properties | None = None
        self.assigned = ""
        ev = threading.Event()
        self.ev = ev
        self.c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=cid, protocol=version)
        self.c.on_message = lambda c, u, m: self.got.append(m)

        def on_connect(c, u, flags, rc, props) -> None:
            self.connack_props = props
            ev.set()

        self.c.on_connect = on_connect
        self.c.on_subscribe = lambda *a: ev.set()
        request.addfinalizer(self.c.loop_stop)
        self.c.connect(HOST, port)
        self.c.loop_start()
        assert ev.wait(10), f"{cid}: no CONNACK"

    def subscribe(self, topic_filter: str, qos: int, sub_id: int = 0, no_local: bool = False) -> None:
        self.ev.clear()
        if sub_id or no_local:
            props = None
            if sub_id:
                props = Properties(PacketTypes.SUBSCRIBE)
                props.SubscriptionIdentifier = sub_id
            self.c.subscribe(topic_filter, options=SubscribeOptions(qos=qos, noLocal=no_local),
                             properties=props)
        else:
            self.c.subscribe(topic_filter, qos=qos)
        assert self.ev.wait(10), "no SUBACK"

    def stop(self) -> None:
        self.c.disconnect()
        self.c.loop_stop()


def test_shared_and_non_shared_subscriptions_each_deliver_a_copy(request, bridge) -> None:
    """MQTT 5 4.8.2: a client whose non-shared subscription and shared subscriptions match
    a message gets one copy for the non-shared one and one per shared subscription it
    was picked for (here the sole member of two groups: three copies, each at its
    subscription's QoS); overlapping non-shared subscriptions still give one copy."""
    both = Member(request, bridge.port, "share-both", paho.MQTTv5)
    both.subscribe("jobs/both/#", 1)
    both.subscribe("jobs/both/+", 0)  # overlaps the first: no extra copy
    both.subscribe("$share/solo/jobs/both/#", 0)
    both.subscribe("$share/duo/jobs/both/+", 1)
    plain = Member(request, bridge.port, "share-plain", paho.MQTTv5)
    plain.subscribe("jobs/both/#", 1)
    pub = Member(request, bridge.port, "share-bpub", paho.MQTTv5)
    jobs = [f"both-{i}".encode() for i in range(10)]
    for j in jobs:
        pub.c.publish("jobs/both/x", j, qos=1).wait_for_publish(10)
    wait_until(lambda: len(both.got) >= 3 * len(jobs), what="three copies of each job", timeout=20.0)
    wait_until(lambda: len(plain.got) >= len(jobs), what="the plain subscriber's copies", timeout=20.0)
    pub.c.publish("jobs/both/x", b"end", qos=1).wait_for_publish(10)
    wait_until(lambda: sum(m.payload == b"end" for m in both.got) == 3, what="three end markers", timeout=20.0)
    copies = {j: sorted(m.qos for m in both.got if m.payload == j) for j in jobs}
    assert copies == {j: [0, 1, 1] for j in jobs}, copies
    assert [m.payload for m in plain.got if m.payload != b"end"] == jobs  # one copy each
    for c in (both, plain, pub):
        c.stop()


def _ids(m: paho.MQTTMessage) -> list[int]:
    ids = getattr(m.properties, "SubscriptionIdentifier", [])
    return sorted(ids if isinstance(ids, list) else [ids])


def test_subscription_identifiers_are_per_copy(request, bridge, module_server) -> None:
    """MQTT 5 3.3.4 / 4.8.2: overlapping non-shared subscriptions give one PUBLISH with all
    their identifiers; each shared subscription's copy carries that subscription's
    identifier only (locally routed and from the log alike)."""
    c = Member(request, bridge.port, "sid-copies", paho.MQTTv5)
    c.subscribe("jobs/sid/#", 1, sub_id=1)
    c.subscribe("jobs/sid/+", 0, sub_id=2)
    c.subscribe("$share/sid1/jobs/sid/#", 0, sub_id=3)
    c.subscribe("$share/sid2/jobs/sid/+", 1, sub_id=4)
    c.subscribe("devices/sid-copies/commands", 1, sub_id=5)
    c.subscribe("$share/sid3/devices/sid-copies/commands", 1, sub_id=6)
    c.subscribe("$share/sid4/devices/sid-copies/#", 0)  # no identifier
    pub = Member(request, bridge.port, "sid-pub", paho.MQTTv5)
    pub.c.publish("jobs/sid/x", b"one", qos=1).wait_for_publish(10)
    pub.c.publish("jobs/sid/x/y", b"deep", qos=1).wait_for_publish(10)
    producer = KafkaProducer(bootstrap_servers=module_server.bootstrap)
    request.addfinalizer(producer.close)
    producer.send("commands", key=b"sid-copies", value=b"cmd").get(timeout=30)
    wait_until(lambda: len(c.got) >= 3 + 2 + 3, what="every copy", timeout=20.0)
    copies = sorted((m.payload, _ids(m), m.qos) for m in c.got)
    assert copies == sorted([
        (b"one", [1, 2], 1), (b"one", [3], 0), (b"one", [4], 1),
        (b"deep", [1], 1), (b"deep", [3], 0),
        (b"cmd", [5], 1), (b"cmd", [6], 1), (b"cmd", [], 0),
    ]), copies
    for m in (c, pub):
        m.stop()


def test_no_local_with_an_overlapping_subscription_and_retained_identifiers(request, bridge) -> None:
    """No-local holds per subscription (MQTT 5 3.8.3.1): my own message still comes through an
    overlapping subscription without it, at that one's QoS and with its identifier only. A
    retained message sent because of a SUBSCRIBE carries that subscription's identifier."""
    me = Member(request, bridge.port, "sid-nl", paho.MQTTv5)
    me.subscribe("jobs/nl/x", 1, sub_id=7, no_local=True)
    me.subscribe("jobs/nl/+", 0, sub_id=8)
    me.c.publish("jobs/nl/x", b"mine", qos=1).wait_for_publish(10)
    mosquitto_pub(bridge.port, "-t", "jobs/nl/x", "-m", "theirs", "-q", "1")
    wait_until(lambda: any(m.payload == b"theirs" for m in me.got), what="the other client's message", timeout=20.0)
    assert sorted((m.payload, _ids(m), m.qos) for m in me.got) == [
        (b"mine", [8], 0), (b"theirs", [7, 8], 1)]
    mosquitto_pub(bridge.port, "-t", "jobs/ret/a", "-m", "kept", "-r", "-q", "1")
    r = Member(request, bridge.port, "sid-ret", paho.MQTTv5)
    r.subscribe("jobs/ret/#", 1, sub_id=10)
    wait_until(lambda: len(r.got) == 1, what="the retained message", timeout=20.0)
    r.subscribe("jobs/ret/+", 1, sub_id=11)  # overlaps: the retained message again, for this one
    wait_until(lambda: len(r.got) == 2, what="the retained message again", timeout=20.0)
    assert [(_ids(m), m.retain) for m in r.got] == [([10], True), ([11], True)]
    mosquitto_pub(bridge.port, "-t", "jobs/ret/a", "-m", "", "-r", "-q", "1")
    for m in (me, r):
        m.stop()


def test_shared_subscription_gives_each_message_to_one_member(request, bridge) -> None:
    mosquitto_pub(bridge.port, "-t", "jobs/retained", "-m", "old", "-r", "-q", "1")
    v3 = Member(request, bridge.port, "share-v3", paho.MQTTv311)
    v5 = Member(request, bridge.port, "share-v5", paho.MQTTv5)
    assert v5.connack_props is not None and v5.connack_props.SharedSubscriptionAvailable == 1
    v3.subscribe("$share/workers/jobs/#", 1)
    v5.subscribe("$share/workers/jobs/#", 0)  # its maximum QoS: 0
    watcher = Member(request, bridge.port, "share-watch", paho.MQTTv5)
    watcher.subscribe("jobs/#", 1)  # a non-shared subscription gets everything
    pub = Member(request, bridge.port, "share-pub", paho.MQTTv5)
    jobs = [f"job-{i}".encode() for i in range(40)]
    for j in jobs:
        pub.c.publish("jobs/work", j, qos=1).wait_for_publish(10)
    # markers until each member has one: everything routed before them has arrived
    n = 0
    while not all(any(m.payload.startswith(b"end") for m in g.got) for g in (v3, v5)):
        assert n < 200, "markers never reached both members"
        pub.c.publish("jobs/work", b"end%d" % n, qos=1).wait_for_publish(10)
        n += 1
    wait_until(lambda: any(m.payload == b"end%d" % (n - 1) for m in watcher.got), what="the watcher's last marker", timeout=20.0)
    work = {g: [m for m in g.got if not m.payload.startswith(b"end")] for g in (v3, v5)}
    assert sorted(m.payload for g in work for m in work[g]) == sorted(jobs)  # each exactly once
    assert work[v3] and work[v5], "round robin gave one member nothing"
    assert {m.qos for m in work[v3]} == {1} and {m.qos for m in work[v5]} == {0}  # min(1, member's)
    assert not any(m.topic == "jobs/retained" for g in (v3, v5) for m in g.got)  # MQTT 5 4.8.2
    assert [m.payload for m in watcher.got if m.topic == "jobs/retained"] == [b"old"]
    assert [m.payload for m in watcher.got if not m.payload.startswith(b"end")][1:] == jobs
    for c in (v3, v5, watcher, pub):
        c.stop()
    mosquitto_pub(bridge.port, "-t", "jobs/retained", "-n", "-r", "-q", "1")


def test_mosquitto_sub_is_a_member_too(request, bridge) -> None:
    """Debian's mosquitto_sub (3.1.1) in a share group with a paho 5 member."""
    other = Member(request, bridge.port, "share-p5", paho.MQTTv5)
    other.subscribe("$share/g2/jobs/m/+", 1)
    sub = subprocess.Popen(["mosquitto_sub", "-h", HOST, "-p", str(bridge.port), "-V", "mqttv311",
                            "-i", "share-mosq", "-q", "1", "-t", "$share/g2/jobs/m/+", "-v"],
                           stdout=subprocess.PIPE, text=True)
    request.addfinalizer(lambda: (sub.kill(), sub.wait()))
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(sub.stdout.readline, "")), daemon=True)
    reader.start()
    probes = 0
    while not lines:  # until mosquitto_sub's subscription has taken a message
        assert probes < 100, "mosquitto_sub never got a message"
        mosquitto_pub(bridge.port, "-t", "jobs/m/probe", "-m", f"p{probes}", "-q", "1")
        probes += 1
    sent = [f"p{i}" for i in range(probes)] + [f"m{i}" for i in range(20)]
    for i in range(20):
        mosquitto_pub(bridge.port, "-t", f"jobs/m/{i}", "-m", f"m{i}", "-q", "1")
    wait_until(lambda: len(lines) + len(other.got) >= len(sent), what="every message at the group", timeout=20.0)
    mosquitto_pub(bridge.port, "-t", "jobs/m/x", "-m", "late", "-q", "1")  # nothing may follow it
    wait_until(lambda: any("late" in x for x in lines) or any(m.payload == b"late" for m in other.got), what="one more message", timeout=20.0)
    got = [x.split(" ", 1)[1].strip() for x in lines] + [m.payload.decode() for m in other.got]
    assert sorted(got) == sorted([*sent, "late"])
    assert any(x.startswith("jobs/m/") and " m" in x for x in lines) and any(
        m.payload.startswith(b"m") for m in other.got), "round robin left a member out"
    other.stop()


def test_a_leaving_member_hands_its_messages_to_the_others(request, bridge) -> None:
    """A member that took messages and never acknowledged them drops its connection (clean
    session: the session ends): the other member gets every message (MQTT 5 4.8.2)."""
    lazy = Raw(bridge.port, MQTT_5)
    lazy.connect("share-lazy", clean=True, props={"receive_maximum": 5})
    assert lazy.subscribe("$share/hand/jobs/h/#", 1) == [1]
    keen = Member(request, bridge.port, "share-keen", paho.MQTTv5)
    keen.subscribe("$share/hand/jobs/h/#", 1, sub_id=22)
    pub = Member(request, bridge.port, "share-hpub", paho.MQTTv5)
    sent = [f"h{i}".encode() for i in range(30)]
    for p in sent:
        pub.c.publish("jobs/h/x", p, qos=1).wait_for_publish(10)
    lazy_got = [lazy.packet() for _ in range(5)]  # its window: 5 in flight, no PUBACK from it
    assert all(isinstance(p, Publish) and p.qos == 1 for p in lazy_got)
    wait_until(lambda: len(keen.got) >= 10, what="the keen member's share", timeout=20.0)
    lazy.close()
    wait_until(lambda: len(keen.got) >= len(sent), what="the lazy member's messages at the keen one", timeout=20.0)
    pub.c.publish("jobs/h/x", b"marker", qos=1).wait_for_publish(10)
    wait_until(lambda: any(m.payload == b"marker" for m in keen.got), what="the marker", timeout=20.0)
    assert sorted(m.payload for m in keen.got if m.payload != b"marker") == sorted(sent)
    assert all(_ids(m) == [22] for m in keen.got)  # handed over: the keen one's identifier
    assert {p.payload for p in lazy_got} <= set(sent)
    keen.stop()
    pub.stop()


def test_shared_subscription_errors(bridge) -> None:
    r = Raw(bridge.port, MQTT_5)
    r.connect("share-bad", clean=True)
    r.send(encode(Subscribe(2, [("$share/g+/jobs/x", SubOptions(1)), ("$share/g", SubOptions(1)),
                                ("$share//jobs/x", SubOptions(1)), ("$share/ok/jobs/x", SubOptions(1))]), MQTT_5))
    sa = r.packet()
    assert isinstance(sa, Suback) and sa.reasons == [0x8F, 0x8F, 0x8F, 1]
    assert sa.properties.get("reason_string") == "topic filter invalid"
    # no local on a shared subscription: a protocol error (MQTT 5 3.8.3.1)
    r.send(encode(Subscribe(3, [("$share/g/jobs/x", SubOptions(1, no_local=True))]), MQTT_5))
    d = r.packet()
    assert isinstance(d, Disconnect) and d.reason == 0x82
    with pytest.raises(ConnectionError):
        r.packet()
    r.close()
    # a 3.1.1 client may use shared subscriptions (as with mosquitto)
    r3 = Raw(bridge.port, 4)
    r3.connect("share-311", clean=True)
    assert r3.subscribe("$share/g/jobs/y", 2) == [2]
    r3.close()


def test_server_assigned_client_identifiers(request, bridge, module_server) -> None:
    # MQTT 5: an empty client id gets one, named in the CONNACK (also with a session)
    a = Member(request, bridge.port, "", paho.MQTTv5)
    assigned = a.connack_props.AssignedClientIdentifier
    assert assigned
    b = Member(request, bridge.port, "", paho.MQTTv5)
    assert b.connack_props.AssignedClientIdentifier not in ("", assigned)
    r = Raw(bridge.port, MQTT_5)
    ack = r.connect("", clean=False, props={"session_expiry_interval": 60})
    assert ack.properties["assigned_client_identifier"] not in ("", assigned)
    r.close()
    # the assigned id is the client's own: it publishes under devices/{that id}/... as that device
    a.c.publish(f"devices/{assigned}/telemetry", b"mine", qos=1).wait_for_publish(10)
    (rec,) = [r for r in log_records(module_server.bootstrap, "telemetry") if r.key == assigned.encode()]
    assert rec.value == b"mine" and dict(rec.headers)["mqtt.client_id"] == assigned.encode()
    a.stop()
    b.stop()
    # MQTT 3.1.1: only with clean session; otherwise CONNACK return code 2 (identifier rejected)
    r3 = Raw(bridge.port, 4)
    ack3 = r3.connect("", clean=True)
    assert not ack3.properties  # no properties in 3.1.1
    r3.close()
    r3 = Raw(bridge.port, 4)
    r3.send(encode(Connect("", 4, False, 60, None, None, None, {}), 4))
    refused = r3.packet()
    assert isinstance(refused, Connack) and refused.reason == 2
    with pytest.raises((ConnectionError, socket.timeout)):
        r3.packet(timeout=5)
    r3.close()


def test_request_response_across_the_log_and_between_clients(request, bridge, module_server) -> None:
    """A device's request carries Response Topic and Correlation Data into the log as record
    headers; a service's reply (a record with those headers) reaches the device with them
    as properties; between two MQTT clients they pass unchanged."""
    dev = Member(request, bridge.port, "rr-dev", paho.MQTTv5)
    dev.subscribe("devices/rr-dev/commands", 1)
    props = Properties(PacketTypes.PUBLISH)
    props.ResponseTopic = "devices/rr-dev/commands"
    props.CorrelationData = b"\x00\xffreq-7"
    props.ContentType = "application/json"
    props.UserProperty = [("trace", "t-1")]
    dev.c.publish("devices/rr-dev/telemetry", b'{"ask": 1}', qos=1, properties=props).wait_for_publish(10)
    (rec,) = [r for r in log_records(module_server.bootstrap, "telemetry") if r.key == b"rr-dev"]
    headers = dict(rec.headers)
    assert headers["mqtt.response_topic"] == b"devices/rr-dev/commands"
    assert headers["mqtt.correlation_data"] == b"\x00\xffreq-7"
    assert headers["mqtt.content_type"] == b"application/json"
    assert headers["trace"] == b"t-1"
    # the service answers on the log: key = device, the request's correlation data
    producer = KafkaProducer(bootstrap_servers=module_server.bootstrap)
    request.addfinalizer(producer.close)
    producer.send("commands", key=b"rr-dev", value=b'{"answer": 42}', headers=[
        ("mqtt.correlation_data", headers["mqtt.correlation_data"]), ("mqtt.content_type", b"application/json"),
        ("mqtt.response_topic", b"rr/ack"), ("trace", b"t-1")])
    producer.flush()
    wait_until(lambda: dev.got, what="the reply", timeout=20.0)
    reply = dev.got[0]
    assert reply.payload == b'{"answer": 42}'
    assert reply.properties.CorrelationData == b"\x00\xffreq-7"
    assert reply.properties.ContentType == "application/json"
    assert reply.properties.ResponseTopic == "rr/ack"
    assert reply.properties.UserProperty == [("trace", "t-1")]  # only the unmapped header
    # between MQTT clients (a topic no uplink rule maps): passed through as they came
    responder = Member(request, bridge.port, "rr-responder", paho.MQTTv5)
    responder.subscribe("rr/requests", 1)
    asker = Member(request, bridge.port, "rr-asker", paho.MQTTv5)
    asker.subscribe("rr/replies/asker", 1)
    q = Properties(PacketTypes.PUBLISH)
    q.ResponseTopic = "rr/replies/asker"
    q.CorrelationData = b"c-99"
    asker.c.publish("rr/requests", b"ping", qos=1, properties=q).wait_for_publish(10)
    wait_until(lambda: responder.got, what="the request", timeout=20.0)
    got = responder.got[0].properties
    a = Properties(PacketTypes.PUBLISH)
    a.CorrelationData = got.CorrelationData
    responder.c.publish(got.ResponseTopic, b"pong", qos=1, properties=a).wait_for_publish(10)
    wait_until(lambda: asker.got, what="the response", timeout=20.0)
    assert (asker.got[0].payload, asker.got[0].properties.CorrelationData) == (b"pong", b"c-99")
    for c in (dev, responder, asker):
        c.stop()


def _closed_with(r: Raw, reason: int) -> None:
    """The bridge sends DISCONNECT ``reason`` and closes (anything before it is skipped)."""
    while True:
        p = r.packet()
        if isinstance(p, Disconnect):
            assert p.reason == reason, p
            break
    with pytest.raises(ConnectionError):
        r.packet()
    r.close()


def test_topic_aliases_from_the_client(bridge) -> None:
    """MQTT 5 3.3.2.3.4: the CONNACK's Topic Alias Maximum; an alias set with a topic and
    then used alone; 0 or above the maximum is DISCONNECT 0x94; an unknown alias 0x82."""
    sub = Raw(bridge.port, MQTT_5)
    sub.connect("alias-sub", clean=True)
    assert sub.subscribe("jobs/alias/#", 1) == [1]
    r = Raw(bridge.port, MQTT_5)
    maximum = r.connect("alias-pub", clean=True).properties["topic_alias_maximum"]
    assert maximum >= 1
    r.send(encode(Publish("jobs/alias/a", b"1", 0, properties={"topic_alias": 1}), MQTT_5))
    r.send(encode(Publish("", b"2", 0, properties={"topic_alias": 1}), MQTT_5))
    r.send(encode(Publish("jobs/alias/b", b"3", 0, properties={"topic_alias": 1}), MQTT_5))  # re-mapped
    r.send(encode(Publish("", b"4", 0, properties={"topic_alias": 1}), MQTT_5))
    got = [sub.packet() for _ in range(4)]
    assert [(p.topic, p.payload) for p in got] == [
        ("jobs/alias/a", b"1"), ("jobs/alias/a", b"2"), ("jobs/alias/b", b"3"), ("jobs/alias/b", b"4")]
    r.send(encode(Publish("jobs/alias/c", b"x", 0, properties={"topic_alias": maximum + 1}), MQTT_5))
    _closed_with(r, 0x94)
    r = Raw(bridge.port, MQTT_5)
    r.connect("alias-zero", clean=True)
    r.send(encode(Publish("jobs/alias/c", b"x", 0, properties={"topic_alias": 0}), MQTT_5))
    _closed_with(r, 0x94)
    r = Raw(bridge.port, MQTT_5)
    r.connect("alias-unknown", clean=True)
    r.send(encode(Publish("", b"x", 0, properties={"topic_alias": 2}), MQTT_5))
    _closed_with(r, 0x82)
    sub.close()


def test_receive_maximum_counts_qos2_until_pubcomp(request, module_server, tmp_path) -> None:
    """MQTT 5 4.9: a QoS 2 PUBLISH takes a slot of the bridge's Receive Maximum until the
    PUBCOMP, not the PUBREC; a PUBREL for an unknown packet id gets PUBCOMP 0x92."""
    from mqtt_bridge.codec import PacketType, puback

    b = BridgeProcess(module_server.bootstrap, tmp_path / "rm2.log", "--log-format", "text",
                      "--receive-maximum", "3")
    request.addfinalizer(b.stop)
    b.start()
    r = Raw(b.port, MQTT_5)
    assert r.connect("rm2-dev", clean=True).properties["receive_maximum"] == 3
    for pid in (1, 2, 3):
        r.publish2("devices/rm2-dev/telemetry", b"q%d" % pid, pid)
        r.expect_ack(PacketType.PUBREC, pid)
    r.publish2("devices/rm2-dev/telemetry", b"q1", 1, dup=True)  # the same message again: no room taken
    r.expect_ack(PacketType.PUBREC, 1)
    r.send(puback(2, PacketType.PUBREL))
    r.expect_ack(PacketType.PUBCOMP, 2)
    r.publish2("devices/rm2-dev/telemetry", b"q4", 4)  # a slot is free again
    r.expect_ack(PacketType.PUBREC, 4)
    r.send(puback(77, PacketType.PUBREL))
    assert r.expect_ack(PacketType.PUBCOMP, 77).reason == 0x92
    r.publish2("devices/rm2-dev/telemetry", b"q5", 5)  # 1, 3, 4 await PUBREL: one too many
    _closed_with(r, 0x93)
    assert sorted(rec.value for rec in log_records(module_server.bootstrap, "telemetry")
                  if rec.key == b"rm2-dev") == [b"q1", b"q2", b"q3", b"q4"]


def test_v5_session_expiry(bridge) -> None:
    """MQTT 5 3.1.2.11: the session ends its interval after the disconnect; DISCONNECT may
    change the interval (not from 0: DISCONNECT 0x82)."""
    import time

    props = {"session_expiry_interval": 2}
    r = Raw(bridge.port, MQTT_5)
    assert not r.connect("exp-short", clean=False, props=props).session_present
    assert r.subscribe("devices/exp-short/commands", 1) == [1]
    r.close()
    left = time.monotonic()
    wait_until(lambda: "session exp-short expired" in bridge.output(), timeout=15, what="the session to expire")
    assert time.monotonic() - left >= 1.5
    r = Raw(bridge.port, MQTT_5)
    assert not r.connect("exp-short", clean=False, props=props).session_present
    r.close()
    # DISCONNECT with a longer interval keeps the session past the CONNECT's 2 s
    r = Raw(bridge.port, MQTT_5)
    r.connect("exp-longer", clean=False, props=props)
    assert r.subscribe("devices/exp-longer/commands", 1) == [1]
    r.send(encode(Disconnect(0, {"session_expiry_interval": 600}), MQTT_5))
    r.close()
    left = time.monotonic()
    wait_until(lambda: time.monotonic() - left > 3.0, what="the first interval to pass", timeout=20.0)
    r = Raw(bridge.port, MQTT_5)
    assert r.connect("exp-longer", clean=False, props=props).session_present
    r.close()
    # 0 on CONNECT, then an interval on DISCONNECT: a protocol error
    r = Raw(bridge.port, MQTT_5)
    r.connect("exp-zero", clean=True)
    r.send(encode(Disconnect(0, {"session_expiry_interval": 60}), MQTT_5))
    _closed_with(r, 0x82)


def test_client_maximum_packet_size_and_subscription_identifier_from_a_client(bridge) -> None:
    """MQTT 5 3.1.2.11.4: a message larger than the client's Maximum Packet Size is not sent
    to it (the next one is); 3.3.4: a client's PUBLISH with a Subscription Identifier is a
    protocol error (DISCONNECT 0x82)."""
    small = Raw(bridge.port, MQTT_5)
    small.connect("mps-small", clean=True, props={"maximum_packet_size": 64})
    assert small.subscribe("jobs/mps", 1) == [1]
    pub = Raw(bridge.port, MQTT_5)
    pub.connect("mps-pub", clean=True)
    pub.send(encode(Publish("jobs/mps", b"x" * 100, 0), MQTT_5))
    pub.send(encode(Publish("jobs/mps", b"fits", 0), MQTT_5))
    p = small.packet()
    assert isinstance(p, Publish) and p.payload == b"fits"
    pub.send(encode(Publish("jobs/mps", b"x", 0, properties={"subscription_identifier": 5}), MQTT_5))
    _closed_with(pub, 0x82)
    small.close()


@pytest.mark.parametrize("version", [paho.MQTTv311, paho.MQTTv5])
def test_offline_persistent_session_gets_locally_routed_messages(request, bridge, version: int) -> None:
    """QoS 1/2 messages on an unmapped topic wait for an offline persistent session (as in
    mosquitto); QoS 0 ones do not."""
    cid = f"offline-{version}"
    kw = {"clean_session": False} if version == paho.MQTTv311 else {}
    got: list[paho.MQTTMessage] = []
    ev = threading.Event()
    c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=cid, protocol=version, **kw)
    c.on_message = lambda cl, u, m: got.append(m)
    c.on_connect = lambda *a: ev.set()
    c.on_subscribe = lambda *a: ev.set()
    request.addfinalizer(c.loop_stop)
    props = None
    if version == paho.MQTTv5:
        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = 300

    def connect() -> None:
        ev.clear()
        if version == paho.MQTTv5:
            c.connect(HOST, bridge.port, clean_start=False, properties=props)
        else:
            c.connect(HOST, bridge.port)
        c.loop_start()
        assert ev.wait(10)

    connect()
    ev.clear()
    c.subscribe(f"jobs/off/{version}", qos=2)
    assert ev.wait(10)
    c.disconnect()
    c.loop_stop()
    wait_until(lambda: f"client {cid} disconnected" in bridge.output(), what="the disconnect", timeout=20.0)
    for i, qos in enumerate((1, 2, 0, 1)):
        mosquitto_pub(bridge.port, "-t", f"jobs/off/{version}", "-m", f"o{i}", "-q", str(qos))
    connect()
    mosquitto_pub(bridge.port, "-t", f"jobs/off/{version}", "-m", "live", "-q", "1")
    wait_until(lambda: any(m.payload == b"live" for m in got), what="the live message", timeout=20.0)
    wait_until(lambda: len(got) >= 4, what="the QoS 2 message (paho hands it over at PUBREL)", timeout=20.0)
    c.disconnect()
    c.loop_stop()
    assert sorted((m.payload, m.qos) for m in got) == [(b"live", 1), (b"o0", 1), (b"o1", 2), (b"o3", 1)]


def test_reason_strings_follow_request_problem_information(bridge) -> None:
    """Refusals carry a reason string, except where the client asked for none (Request
    Problem Information 0: only CONNACK and DISCONNECT may have one, MQTT 5 3.1.2.11.7)."""
    from mqtt_bridge.codec import Ack, Unsubscribe

    for asked, expect in ((None, "not authorized"), (0, None)):
        r = Raw(bridge.port, MQTT_5)
        r.connect(f"rpi-{asked}", clean=True, props={} if asked is None else {"request_problem_information": 0})
        r.send(encode(Publish("elsewhere/x", b"x", 1, packet_id=3), MQTT_5))
        ack = r.packet()
        assert isinstance(ack, Ack) and ack.packet_id == 3 and ack.reason == 0x87
        assert ack.properties.get("reason_string") == expect
        r.send(encode(Subscribe(4, [("elsewhere/#", SubOptions(1))]), MQTT_5))
        sa = r.packet()
        assert isinstance(sa, Suback) and sa.reasons == [0x87]
        assert sa.properties.get("reason_string") == expect
        r.send(encode(Subscribe(5, [("$share/u/jobs/u", SubOptions(1))]), MQTT_5))
        assert r.packet().reasons == [1]
        r.send(encode(Unsubscribe(6, ["$share/u/jobs/u", "jobs/never"]), MQTT_5))
        assert r.packet().reasons == [0, 0x11]  # a shared subscription unsubscribes as any other
        r.close()


@pytest.mark.parametrize("will_topic", ["jobs/will/#", "jobs/+/x", ""])
def test_a_will_topic_must_be_a_topic_name(request, bridge, will_topic: str) -> None:
    """MQTT 5 3.1.3.3 / 4.7.1, 3.1.1 3.1.3.3: a will topic is a topic name (no wildcards,
    not empty). v5: CONNACK 0x90 Topic Name invalid with a reason string; 3.1.1 (no such
    return code): the connection is closed without a CONNACK. No will is ever published."""
    watcher = Member(request, bridge.port, "will-watch", paho.MQTTv5)
    watcher.subscribe("jobs/#", 0)
    v5 = Raw(bridge.port, MQTT_5)
    v5.send(encode(Connect("will-bad5", MQTT_5, True, 60, None, None,
                           Will(will_topic, b"gone", 0, False, {}), {}), MQTT_5))
    ack = v5.packet()
    assert isinstance(ack, Connack) and ack.reason == 0x90, ack
    assert "reason_string" in ack.properties
    with pytest.raises((ConnectionError, OSError)):
        v5.packet()
    v3 = Raw(bridge.port, 4)
    v3.send(encode(Connect("will-bad3", 4, True, 60, None, None, Will(will_topic, b"gone", 0, False, {}), {}), 4))
    with pytest.raises((ConnectionError, OSError)):
        v3.packet()
    mosquitto_pub(bridge.port, "-t", "jobs/will-end", "-m", "end")
    wait_until(lambda: any(m.topic == "jobs/will-end" for m in watcher.got), what="the marker", timeout=20.0)
    assert [m.topic for m in watcher.got] == ["jobs/will-end"]
    watcher.stop()


def test_unsubscribe_with_an_invalid_filter(bridge) -> None:
    """MQTT 5 3.11.3: an UNSUBSCRIBE filter that is no valid topic filter gets UNSUBACK 0x8F
    Topic Filter invalid (the others are answered as usual, the connection stays); 3.1.1 has
    no reason codes: a protocol violation, closed (4.8.0)."""
    from mqtt_bridge.codec import Unsuback, Unsubscribe

    r = Raw(bridge.port, MQTT_5)
    r.connect("unsub-bad5", clean=True)
    assert r.subscribe("jobs/ok", 1) == [1]
    r.send(encode(Unsubscribe(2, ["$share/g", "jobs/#/x", "jobs/ok", "jobs/never"]), MQTT_5))
    ack = r.packet()
    assert isinstance(ack, Unsuback) and ack.reasons == [0x8F, 0x8F, 0, 0x11], ack
    assert ack.properties.get("reason_string") == "topic filter invalid"
    r.send(b"\xc0\x00")  # PINGREQ: still connected
    assert r.packet().type == 13  # PINGRESP
    r.close()
    v3 = Raw(bridge.port, 4)
    v3.connect("unsub-bad3", clean=True)
    v3.send(encode(Unsubscribe(2, ["$share/g"]), 4))
    with pytest.raises((ConnectionError, OSError)):
        v3.packet()
    assert "unsub-bad3" in bridge.output() and "Fatal error" not in bridge.output()


@pytest.mark.parametrize("packet", ["publish", "subscribe", "puback", "will", "connect-value"])
def test_a_property_not_valid_for_its_packet_is_malformed(bridge, packet: str) -> None:
    """MQTT 5 2.2.2.2: a property not valid for its packet type makes the packet malformed
    (DISCONNECT 0x81); a yes/no property other than 0 or 1 is a protocol error (3.1.2.11.6,
    before the CONNACK: the connection is closed)."""
    from mqtt_bridge.codec import Disconnect

    r = Raw(bridge.port, MQTT_5)
    if packet == "will":
        r.send(encode(Connect("prop-will", MQTT_5, True, 60, None, None,
                              Will("jobs/w", b"x", 0, False, {"topic_alias": 3}), {}), MQTT_5))
        with pytest.raises((ConnectionError, OSError)):
            r.packet()
        return
    if packet == "connect-value":
        r.send(encode(Connect("prop-val", MQTT_5, True, 60, None, None, None,
                              {"request_problem_information": 2}), MQTT_5))
        with pytest.raises((ConnectionError, OSError)):
            r.packet()
        return
    r.connect(f"prop-{packet}", clean=True)
    if packet == "publish":
        r.send(encode(Publish("jobs/p", b"x", 1, packet_id=1, properties={"session_expiry_interval": 5}), MQTT_5))
    elif packet == "subscribe":
        r.send(encode(Subscribe(1, [("jobs/p", SubOptions(1))], {"message_expiry_interval": 5}), MQTT_5))
    else:
        from mqtt_bridge.codec import Ack, PacketType

        r.send(encode(Ack(PacketType.PUBACK, 9, 0x10, {"topic_alias": 1}), MQTT_5))
    d = r.packet()
    assert isinstance(d, Disconnect) and d.reason == 0x81, d
    with pytest.raises((ConnectionError, OSError)):
        r.packet()


@pytest.mark.parametrize("version", [4, MQTT_5])
def test_queued_local_messages_stay_with_a_persistent_session(request, bridge, version: int) -> None:
    """MQTT 5 4.1 / 3.1.1 4.1: a persistent session's state includes the QoS 1/2 messages
    not yet sent to the client. Locally routed ones queued behind a full window (v5: the
    client's receive maximum 1; 3.1.1: the bridge's window of 32) when the client leaves go
    out after its reconnect, the in-flight ones again with DUP."""
    cid = f"keepq-{version}"
    window = 1 if version == MQTT_5 else 32
    props = {"session_expiry_interval": 300, "receive_maximum": 1} if version == MQTT_5 else {}
    r = Raw(bridge.port, version)
    r.connect(cid, clean=True, props=props)
    r.close()
    r = Raw(bridge.port, version)
    r.connect(cid, clean=False, props=props)
    assert r.subscribe("jobs/keepq", 1) == [1]
    pub = Member(request, bridge.port, f"keepq-pub-{version}", paho.MQTTv5)
    sent = [f"k{i}".encode() for i in range(window + 3)]
    for m in sent:
        pub.c.publish("jobs/keepq", m, qos=1).wait_for_publish(10)
    pub.stop()
    first = [r.packet() for _ in range(window)]
    assert [p.payload for p in first] == sent[:window]  # type: ignore[attr-defined]
    r.close()  # the window in flight, three queued behind it
    wait_until(lambda: f"client {cid} disconnected" in bridge.output(), what="the disconnect", timeout=20.0)
    r = Raw(bridge.port, version)
    assert r.connect(cid, clean=False, props=props).session_present
    got = []
    for _ in sent:
        p = r.packet()
        assert isinstance(p, Publish), p
        got.append((p.payload, p.dup))
        r.send(encode(Ack(PacketType.PUBACK, p.packet_id), version))
    assert got == [(m, i < window) for i, m in enumerate(sent)]
    r.close()


def test_a_response_topic_must_be_a_topic_name(request, bridge, module_server) -> None:
    """MQTT 5 3.3.2.3.5 / 3.1.3.2.5: a Response Topic must not contain wildcards; a PUBLISH
    with one is a protocol error (DISCONNECT 0x82, nothing routed or written), a will with
    one gets CONNACK 0x82."""
    from mqtt_bridge.codec import Disconnect

    watcher = Member(request, bridge.port, "rt-watch", paho.MQTTv5)
    watcher.subscribe("rr/#", 0)
    r = Raw(bridge.port, MQTT_5)
    r.connect("rt-bad", clean=True)
    r.send(encode(Publish("rr/req", b"x", 1, packet_id=1, properties={"response_topic": "rr/answers/#"}), MQTT_5))
    d = r.packet()
    assert isinstance(d, Disconnect) and d.reason == 0x82, d
    w = Raw(bridge.port, MQTT_5)
    w.send(encode(Connect("rt-will", MQTT_5, True, 60, None, None,
                          Will("rr/w", b"x", 0, False, {"response_topic": "rr/+"}), {}), MQTT_5))
    ack = w.packet()
    assert isinstance(ack, Connack) and ack.reason == 0x82, ack
    mosquitto_pub(bridge.port, "-t", "rr/end", "-m", "end")
    wait_until(lambda: any(m.topic == "rr/end" for m in watcher.got), what="the marker", timeout=20.0)
    assert [m.topic for m in watcher.got] == ["rr/end"]
    watcher.stop()
