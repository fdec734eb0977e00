"""MQTT 5 features with paho-mqtt 5 against real logserver and bridge processes:
subscription identifiers (also after a kill -9 of the bridge) and message expiry
(the receiver gets what is left of the interval; an expired retained message is gone).
"""

from __future__ import annotations

import threading
import time

import paho.mqtt.client as paho
import pytest
from helpers.mqtt_kafka import produce_commands
from helpers.mqtt_procs import HOST, BridgeProcess, mosquitto_pub
from helpers.mqtt_raw import Raw
from helpers.mqtt_sessions import stored_session
from helpers.waiting import wait_until
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

pytestmark = pytest.mark.timeout(180)


def start_bridge(request, tmp_path, bootstrap: str) -> BridgeProcess:
    acl = tmp_path / "acl"
    acl.write_text("topic readwrite chat/#\n")
    b = BridgeProcess(bootstrap, tmp_path / "bridge.log", "--log-format", "text", "--acl-file", str(acl))
    request.addfinalizer(b.stop)
    b.start()
    return b


class Client5:
    def __init__(self, request, port: int, cid: str = "", persistent: bool = False) -> None:
        self.got: list[paho.MQTTMessage] = []
        self.acks: list = []
        self.ev = threading.Event()
        self.c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=cid, protocol=paho.MQTTv5)
        self.c.on_message = lambda c, u, m: self.got.append(m)
        self.c.on_connect = lambda c, u, flags, rc, props: (self.acks.append(flags.session_present), self.ev.set())
        self.c.on_subscribe = lambda *a: self.ev.set()
        request.addfinalizer(self.c.loop_stop)
        props = None
        if persistent:
            props = Properties(PacketTypes.CONNECT)
            props.SessionExpiryInterval = 600
        self.c.connect(HOST, port, clean_start=not persistent, properties=props)
        self.c.loop_start()
        assert self.ev.wait(10), "no CONNACK"

    def subscribe(self, topic_filter: str, sub_id: int | None = None) -> None:
        props = None
        if sub_id is not None:
            props = Properties(PacketTypes.SUBSCRIBE)
            props.SubscriptionIdentifier = sub_id
        self.ev.clear()
        self.c.subscribe(topic_filter, options=SubscribeOptions(qos=1), properties=props)
        assert self.ev.wait(10), "no SUBACK"

    def stop(self) -> None:
        self.c.disconnect()
        self.c.loop_stop()


def _ids(m: paho.MQTTMessage) -> list[int]:
    ids = getattr(m.properties, "SubscriptionIdentifier", [])
    return sorted(ids if isinstance(ids, list) else [ids])


def test_subscription_identifiers_come_with_each_message_and_survive_kill9(request, tmp_path, server) -> None:
    bridge = start_bridge(request, tmp_path, server.bootstrap)
    c = Client5(request, bridge.port, "subid-dev", persistent=True)
    c.subscribe("chat/a/#", 7)
    c.subscribe("chat/+/x", 9)
    c.subscribe("chat/b/#")  # no identifier
    for topic in ("chat/a/x", "chat/a/y", "chat/b/x", "chat/b/z"):
        mosquitto_pub(bridge.port, "-t", topic, "-m", topic, "-q", "1")
    wait_until(lambda: len(c.got) == 4, what="4 messages", timeout=20.0)
    assert {m.topic: _ids(m) for m in c.got} == {
        "chat/a/x": [7, 9], "chat/a/y": [7], "chat/b/x": [9], "chat/b/z": []}
    wait_until(lambda: {f: v >> 8 for f, v in (stored_session(server.bootstrap, "subid-dev") or {})
                        .get("subs", {}).items()} == {"chat/a/#": 7, "chat/+/x": 9, "chat/b/#": 0}, what="the identifiers saved with the session", timeout=20.0)
    c.c.loop_stop()
    bridge.kill9()
    bridge.start()
    c2 = Client5(request, bridge.port, "subid-dev", persistent=True)
    assert c2.acks == [True]
    mosquitto_pub(bridge.port, "-t", "chat/a/x", "-m", "again", "-q", "1")
    wait_until(lambda: c2.got, what="the message after the restart", timeout=20.0)
    assert _ids(c2.got[0]) == [7, 9]
    c2.stop()


def test_message_expiry_counts_down_and_ends_retained_messages(request, tmp_path, server) -> None:
    bridge = start_bridge(request, tmp_path, server.bootstrap)
    pub = Client5(request, bridge.port)

    def expiring(seconds: int) -> Properties:
        props = Properties(PacketTypes.PUBLISH)
        props.MessageExpiryInterval = seconds
        return props

    # 600 s: far longer than any wait below, so a loaded machine cannot expire it too
    pub.c.publish("chat/exp", b"long-lived", qos=1, retain=True, properties=expiring(600)).wait_for_publish(10)
    pub.c.publish("chat/short", b"short-lived", qos=1, retain=True, properties=expiring(1)).wait_for_publish(10)
    pub.c.publish("chat/keep", b"forever", qos=1, retain=True).wait_for_publish(10)
    stored = time.monotonic()  # the bridge holds all three by now
    pub.stop()
    wait_until(lambda: time.monotonic() - stored >= 1.2, what="chat/short's second to pass", timeout=20.0)
    sub = Client5(request, bridge.port)
    sub.subscribe("chat/#")
    mosquitto_pub(bridge.port, "-t", "chat/end", "-m", "end", "-q", "1")
    wait_until(lambda: any(m.topic == "chat/end" for m in sub.got), what="the marker", timeout=20.0)
    sub.stop()
    by_topic = {m.topic: m for m in sub.got}
    assert sorted(by_topic) == ["chat/end", "chat/exp", "chat/keep"], "chat/short must have ended"
    # what is left of the 600 s: more than a second has passed since it was stored
    assert 1 <= by_topic["chat/exp"].properties.MessageExpiryInterval <= 599
    assert not hasattr(by_topic["chat/keep"].properties, "MessageExpiryInterval")


def test_topic_aliases_towards_the_client_and_reason_strings(request, tmp_path, server) -> None:
    # (paho-mqtt and libmosquitto clients do not resolve topic aliases they receive: the raw
    # client checks the wire against MQTT 5 section 3.3.2.3.4)

    from mqtt_bridge.codec import MQTT_5, Connack, Connect, Publish, encode

    bridge = start_bridge(request, tmp_path, server.bootstrap)
    c = Raw(bridge.port, MQTT_5)
    c.connect("aliased", clean=True, props={"topic_alias_maximum": 1})
    assert c.subscribe("chat/#", 0) == [0]
    plain = Raw(bridge.port, MQTT_5)
    plain.connect("plain", clean=True)
    assert plain.subscribe("chat/#", 0) == [0]
    for topic in ("chat/al", "chat/al", "chat/other"):
        mosquitto_pub(bridge.port, "-t", topic, "-m", "x")
    got = [c.packet() for _ in range(3)]
    assert all(isinstance(p, Publish) for p in got)
    assert [(p.topic, p.properties.get("topic_alias")) for p in got] == [
        ("chat/al", 1), ("", 1), ("chat/other", None)]  # one alias allowed: the third is in full
    assert [plain.packet().topic for _ in range(3)] == ["chat/al", "chat/al", "chat/other"]
    c.close()
    plain.close()

    r = Raw(bridge.port, MQTT_5)
    r.send(encode(Connect("$bad", MQTT_5, True, 60, None, None, None, {}), MQTT_5))
    ack = r.packet()
    assert isinstance(ack, Connack) and ack.reason == 0x85
    assert ack.properties.get("reason_string") == "client identifier not valid"
    r.close()


def test_will_delay_reconnect_cancels_and_session_end_sends_it(request, tmp_path, server) -> None:
    """v5 will delay: a client back within the delay cancels its will; without a session
    (expiry 0) the will goes at once, whatever the delay (the session ended)."""

    from mqtt_bridge.codec import MQTT_5, Connect, Will, encode

    bridge = start_bridge(request, tmp_path, server.bootstrap)
    watcher = Client5(request, bridge.port)
    watcher.subscribe("chat/wills/#")

    def connect_with_will(cid: str, delay: int, expiry: int) -> Raw:
        r = Raw(bridge.port, MQTT_5)
        will = Will(f"chat/wills/{cid}", b"gone", 1, False, {"will_delay_interval": delay})
        r.send(encode(Connect(cid, MQTT_5, True, 60, None, None, will, {"session_expiry_interval": expiry}),
                      MQTT_5))
        assert r.packet().reason == 0
        return r

    back = connect_with_will("back", 2, 600)
    back.close()  # abnormal: the will waits 2 s
    wait_until(lambda: "client back disconnected (abnormal)" in bridge.output(), what="the disconnect", timeout=20.0)
    again = Raw(bridge.port, MQTT_5)
    again.connect("back", clean=False, props={"session_expiry_interval": 600})  # cancels the will
    now_gone = connect_with_will("nosession", 600, 0)
    now_gone.close()  # at once, not after the 600 s delay:
    wait_until(lambda: any(m.topic == "chat/wills/nosession" for m in watcher.got), timeout=60, what="the will of the client without a session")
    short = connect_with_will("short", 3, 600)  # its will comes after back's would have
    t1 = time.monotonic()
    short.close()
    wait_until(lambda: any(m.topic == "chat/wills/short" for m in watcher.got), timeout=60, what="the delayed will")
    assert time.monotonic() - t1 >= 2.9
    watcher.stop()
    again.close()
    assert [m.topic for m in watcher.got if m.topic == "chat/wills/back"] == []


def test_will_delay_on_session_takeover(request, tmp_path, server) -> None:
    """MQTT 5 3.1.2.5 / 3.1.3.2.2: when a new connection takes over a client id, the old
    connection's delayed will is not sent if the new one continues the session (Clean
    Start 0); with Clean Start 1 the session ends, so the will goes at once."""

    from mqtt_bridge.codec import MQTT_5, Connect, Will, encode

    bridge = start_bridge(request, tmp_path, server.bootstrap)
    watcher = Client5(request, bridge.port)
    watcher.subscribe("chat/wills/#")

    def connect_with_will(cid: str, delay: int, clean: bool = True) -> Raw:
        r = Raw(bridge.port, MQTT_5)
        will = Will(f"chat/wills/{cid}", b"gone", 1, False, {"will_delay_interval": delay})
        r.send(encode(Connect(cid, MQTT_5, clean, 60, None, None, will, {"session_expiry_interval": 600}),
                      MQTT_5))
        assert r.packet().reason == 0
        return r

    first = connect_with_will("taken", 2)
    resumed = Raw(bridge.port, MQTT_5)
    assert resumed.connect("taken", clean=False, props={"session_expiry_interval": 600}).session_present
    assert first.packet().reason == 0x8E  # session taken over
    ended = connect_with_will("ended", 600)
    fresh = Raw(bridge.port, MQTT_5)  # at once, not after the 600 s delay:
    assert not fresh.connect("ended", clean=True, props={"session_expiry_interval": 600}).session_present
    wait_until(lambda: any(m.topic == "chat/wills/ended" for m in watcher.got), timeout=60, what="the will of the ended session")
    dropped = connect_with_will("dropped", 600)
    dropped.close()  # abnormal: the will waits 600 s, or until the session ends
    wait_until(lambda: "client dropped disconnected (abnormal)" in bridge.output(), what="the disconnect", timeout=20.0)
    back = Raw(bridge.port, MQTT_5)
    assert not back.connect("dropped", clean=True).session_present
    wait_until(lambda: any(m.topic == "chat/wills/dropped" for m in watcher.got), timeout=60, what="the will of the session that Clean Start ended")
    marker = connect_with_will("marker", 3)  # its will comes after taken's would have
    marker.close()
    wait_until(lambda: any(m.topic == "chat/wills/marker" for m in watcher.got), timeout=60, what="the marker's will")
    assert [m.topic for m in watcher.got] == ["chat/wills/ended", "chat/wills/dropped", "chat/wills/marker"]
    for r in (first, resumed, ended, fresh, back):
        r.close()
    watcher.stop()


def test_no_local_retain_as_published_and_retain_handling(request, tmp_path, server) -> None:
    bridge = start_bridge(request, tmp_path, server.bootstrap)

    def sub(c: Client5, topic_filter: str, **opts) -> None:
        c.ev.clear()
        c.c.subscribe(topic_filter, options=SubscribeOptions(qos=1, **opts))
        assert c.ev.wait(10), "no SUBACK"

    def marker(c: Client5, name: str) -> list[paho.MQTTMessage]:
        """Everything before a marker published now (the bridge keeps per-client order)."""
        mosquitto_pub(bridge.port, "-t", f"chat/mark/{name}", "-m", "m", "-q", "1")
        wait_until(lambda: any(m.topic == f"chat/mark/{name}" for m in c.got), what="the marker", timeout=20.0)
        out = [m for m in c.got if not m.topic.startswith("chat/mark/")]
        c.got.clear()
        return out

    # no local: my own PUBLISH does not come back, another client's does
    me = Client5(request, bridge.port, "nl-me")
    sub(me, "chat/nl", noLocal=True)
    sub(me, "chat/mark/#")
    me.c.publish("chat/nl", b"mine", qos=1).wait_for_publish(10)
    mosquitto_pub(bridge.port, "-t", "chat/nl", "-m", "theirs", "-q", "1")
    assert [m.payload for m in marker(me, "nl")] == [b"theirs"]

    # retain as published: a live retained PUBLISH keeps its flag only where asked
    rap = Client5(request, bridge.port, "rap-yes")
    sub(rap, "chat/rap", retainAsPublished=True)
    sub(rap, "chat/mark/#")
    plain = Client5(request, bridge.port, "rap-no")
    sub(plain, "chat/rap")
    sub(plain, "chat/mark/#")
    mosquitto_pub(bridge.port, "-t", "chat/rap", "-m", "r", "-r", "-q", "1")
    assert [(m.payload, m.retain) for m in marker(rap, "rap1")] == [(b"r", True)]
    assert [(m.payload, m.retain) for m in marker(plain, "rap2")] == [(b"r", False)]

    # retain handling: 0 = on every subscribe, 1 = only when new, 2 = never
    rh = Client5(request, bridge.port, "rh")
    sub(rh, "chat/mark/#")
    sub(rh, "chat/rap", retainHandling=2)
    assert marker(rh, "rh2") == []
    rh.c.unsubscribe("chat/rap")
    sub(rh, "chat/rap", retainHandling=1)
    assert [m.payload for m in marker(rh, "rh1a")] == [b"r"]
    sub(rh, "chat/rap", retainHandling=1)  # exists already: nothing
    assert marker(rh, "rh1b") == []
    sub(rh, "chat/rap", retainHandling=0)
    assert [m.payload for m in marker(rh, "rh0")] == [b"r"]
    for c in (me, rap, plain, rh):
        c.stop()


def test_refusals_carry_reason_strings(request, tmp_path, server) -> None:

    from mqtt_bridge.codec import MQTT_5, Ack, Publish, Suback, SubOptions, Subscribe, encode

    b = BridgeProcess(server.bootstrap, tmp_path / "plain-bridge.log", "--log-format", "text")
    request.addfinalizer(b.stop)
    b.start()  # the default device binding: devices/{own id}/... only
    r = Raw(b.port, MQTT_5)
    r.connect("rs-dev", clean=True)
    r.send(encode(Publish("devices/someone-else/telemetry", b"x", 1, False, False, 5), MQTT_5))
    ack = r.packet()
    assert isinstance(ack, Ack) and ack.packet_id == 5 and ack.reason == 0x87
    assert ack.properties.get("reason_string") == "not authorized"
    r.send(encode(Subscribe(6, [("#", SubOptions(1)), ("devices/rs-dev/commands", SubOptions(1))]), MQTT_5))
    sa = r.packet()
    assert isinstance(sa, Suback) and sa.reasons == [0x87, 1]
    assert sa.properties.get("reason_string") == "not authorized"
    r.close()


def test_receive_maximum_both_ways(request, tmp_path, server) -> None:
    """The client's Receive Maximum bounds what the bridge has in flight towards it; more
    unacknowledged QoS 1 PUBLISHes than the bridge's receive maximum is DISCONNECT 0x93."""
    import socket

    from mqtt_bridge.codec import MQTT_5, Disconnect, Publish, encode, puback

    b = BridgeProcess(server.bootstrap, tmp_path / "rm-bridge.log", "--log-format", "text",
                      "--receive-maximum", "3")
    request.addfinalizer(b.stop)
    b.start()
    r = Raw(b.port, MQTT_5)
    r.connect("rm-dev", clean=True, props={"receive_maximum": 2})
    assert r.subscribe("devices/rm-dev/commands", 1) == [1]
    produce_commands(server.bootstrap, b"rm-dev", [b"c%d" % i for i in range(5)])
    first = [r.packet() for _ in range(2)]
    assert [p.payload for p in first] == [b"c0", b"c1"]
    with pytest.raises(socket.timeout):
        r.packet(timeout=1.0)  # window of 2 full: nothing more until a PUBACK
    r.send(puback(first[0].packet_id))
    third = r.packet()
    assert third.payload == b"c2"
    r.close()

    # inbound: 200 QoS 1 PUBLISHes in one write arrive before any PUBACK can (a PUBACK waits
    # for the log, on a later event-loop turn): past the bridge's receive maximum of 3
    flood = Raw(b.port, MQTT_5)
    flood.connect("rm-flood", clean=True)
    flood.send(b"".join(encode(Publish("devices/rm-flood/telemetry", b"x", 1, False, False, i), MQTT_5)
                        for i in range(1, 201)))
    seen = []
    while True:
        try:
            p = flood.packet()
        except ConnectionError:
            break
        seen.append(p)
        if isinstance(p, Disconnect):
            break
    disconnects = [p for p in seen if isinstance(p, Disconnect)]
    assert disconnects and disconnects[0].reason == 0x93, seen[-3:]
    flood.close()
