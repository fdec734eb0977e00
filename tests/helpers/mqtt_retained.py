"""Retained MQTT messages in the bridge tests: a bridge allowed chat/#, the retained
topic's newest value per key, and a paho v5 subscriber that collects until a marker."""

from __future__ import annotations

import threading

import paho.mqtt.client as paho

from helpers.mqtt_kafka import log_records
from helpers.mqtt_procs import HOST, BridgeProcess, mosquitto_pub
from helpers.waiting import wait_until

RETAINED = "__mqtt_bridge_retained"


def start_acl_bridge(request, tmp_path, bootstrap: str, name: str = "bridge") -> BridgeProcess:
    acl = tmp_path / "acl"
    acl.write_text("topic readwrite chat/#\n")
    b = BridgeProcess(bootstrap, tmp_path / f"{name}.log", "--log-format", "text", "--acl-file", str(acl))
    request.addfinalizer(b.stop)
    b.start()
    return b


def retained_in_log(bootstrap: str) -> dict[bytes, bytes | None]:
    """Newest value per key of the retained topic (None = tombstone)."""
    out: dict[bytes, bytes | None] = {}
    for r in sorted(log_records(bootstrap, RETAINED), key=lambda r: r.offset):
        out[r.key] = r.value
    return out


class Subscriber:
    """paho v5: subscribe to chat/#, then a non-retained marker ends what to look at."""

    def __init__(self, port: int, request) -> None:
        self.got: list[paho.MQTTMessage] = []
        self.ev = threading.Event()
        self.c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="", protocol=paho.MQTTv5)
        self.c.on_message = lambda c, u, m: self.got.append(m)
        self.c.on_subscribe = lambda *a: self.ev.set()
        request.addfinalizer(self.c.loop_stop)
        self.c.connect(HOST, port)
        self.c.loop_start()
        self.c.subscribe("chat/#", qos=1)
        assert self.ev.wait(10)

    def until_marker(self, port: int) -> list[paho.MQTTMessage]:
        mosquitto_pub(port, "-t", "chat/end", "-m", "end", "-q", "1")
        wait_until(lambda: any(m.topic == "chat/end" for m in self.got), what="the marker", timeout=20.0)
        self.c.disconnect()
        self.c.loop_stop()
        return [m for m in self.got if m.topic != "chat/end"]
