"""Persistent MQTT sessions in the bridge tests: the session topic's stored state of a
client, paho v5 devices with a persistent session (expiry one hour), and bridges with
their own --bridge-id (a session taken over by another bridge)."""

from __future__ import annotations

import json
import threading
import time

import paho.mqtt.client as paho
from kafka import KafkaConsumer
from kafka.structs import TopicPartition
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

from helpers.mqtt_procs import HOST, BridgeProcess

SESSIONS = "__mqtt_bridge_sessions"


def stored_session(bootstrap: str, cid: str) -> dict | None:
    """The newest state of ``cid`` in the session topic, read with kafka-python."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        parts = c.partitions_for_topic(SESSIONS) or set()
        tps = [TopicPartition(SESSIONS, p) for p in parts]
        if not tps:
            return None
        c.assign(tps)
        c.seek_to_beginning(*tps)
        end = c.end_offsets(tps)
        latest: dict | None = None
        deadline = time.monotonic() + 10
        while any(c.position(tp) < end[tp] for tp in tps) and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=200).values():
                for r in recs:
                    if r.key == cid.encode():
                        latest = json.loads(r.value) if r.value is not None else None
        return latest
    finally:
        c.close()


class V5Device:
    """A paho v5 client with a persistent session; what it got, its CONNACKs and SUBACKs."""

    def __init__(self, cid: str, port: int) -> None:
        self.cid = cid
        self.port = port
        self.got: list[tuple[str, bytes]] = []
        self.c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=cid, protocol=paho.MQTTv5)
        self.c.on_message = lambda c, u, m: self.got.append((m.topic, m.payload))
        self.connack: list[tuple[bool, int]] = []
        self.suback: list[list[int]] = []
        self.ev = threading.Event()

        def on_connect(c, u, flags, rc, props) -> None:
            self.connack.append((bool(flags.session_present), rc.value))
            self.ev.set()

        def on_subscribe(c, u, mid, rcs, props) -> None:
            self.suback.append([r.value for r in rcs])
            self.ev.set()

        self.c.on_connect = on_connect
        self.c.on_subscribe = on_subscribe

    def connect(self) -> None:
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = 3600
        self.ev.clear()
        self.c.connect(HOST, self.port, clean_start=False, properties=props)
        self.c.loop_start()
        assert self.ev.wait(10), "no CONNACK"

    def subscribe(self, filters: list[str]) -> list[int]:
        self.ev.clear()
        self.c.subscribe([(f, SubscribeOptions(qos=1)) for f in filters])
        assert self.ev.wait(10), "no SUBACK"
        return self.suback[-1]

    def stop(self) -> None:
        self.c.disconnect()
        self.c.loop_stop()


SESSION_TAKEN_OVER = 0x8E


def start_named_bridge(request, tmp_path, bootstrap: str, name: str, *args: str) -> BridgeProcess:
    """A bridge with ``--bridge-id name``, stopped by the test's finalizer."""
    b = BridgeProcess(bootstrap, tmp_path / f"bridge-{name}.log", "--log-format", "text",
                      "--bridge-id", name, *args)
    request.addfinalizer(b.stop)
    b.start()
    return b


class Device:
    """A paho v5 device with a persistent session (expiry one hour)."""

    def __init__(self, request, cid: str, port: int) -> None:
        self.cid = cid
        self.port = port
        self.got: list[bytes] = []
        self.connack: list[tuple[bool, int]] = []
        self.disconnects: list[int] = []
        self.ev = threading.Event()
        self.c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=cid, protocol=paho.MQTTv5,
                             reconnect_on_failure=False)  # a device taken over must stay away
        self.c.on_message = lambda c, u, m: self.got.append(m.payload)
        self.c.on_connect = self._on_connect
        self.c.on_subscribe = lambda c, u, mid, rcs, props: self.ev.set()
        self.c.on_disconnect = lambda c, u, flags, rc, props: self.disconnects.append(rc.value)
        request.addfinalizer(self.c.loop_stop)

    def _on_connect(self, c, u, flags, rc, props) -> None:
        self.connack.append((bool(flags.session_present), rc.value))
        self.ev.set()

    def connect(self) -> tuple[bool, int]:
        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = 3600
        self.ev.clear()
        self.c.connect(HOST, self.port, clean_start=False, properties=props)
        self.c.loop_start()
        assert self.ev.wait(15), "no CONNACK"
        return self.connack[-1]

    def subscribe_commands(self) -> None:
        self.ev.clear()
        self.c.subscribe([(f"devices/{self.cid}/commands", SubscribeOptions(qos=1))])
        assert self.ev.wait(10), "no SUBACK"

    def disconnect(self) -> None:
        self.c.disconnect()
        self.c.loop_stop()
