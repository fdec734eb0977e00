"""Persistent sessions that always save: large sessions and long client ids survive a
kill -9 of the bridge, oversized ones are refused at SUBSCRIBE, a store that cannot
save is an error with a counter (no silent retry loop), 3.1.1 sessions expire.
Real logserver and bridge processes, paho-mqtt 3.1.1 and 5 clients, kafka-python.
"""

from __future__ import annotations

import json
import re
import threading

import paho.mqtt.client as paho
import pytest
from helpers.mqtt_procs import HOST, BridgeProcess
from helpers.mqtt_sessions import V5Device, stored_session
from helpers.waiting import wait_until
from kafka import KafkaProducer

pytestmark = pytest.mark.timeout(180)


def start_bridge(request, tmp_path, bootstrap: str, *args: str) -> BridgeProcess:
    b = BridgeProcess(bootstrap, tmp_path / "bridge.log", "--log-format", "text", *args)
    request.addfinalizer(b.stop)
    b.start()
    return b


def test_large_session_with_a_long_client_id_survives_kill9(request, tmp_path, server) -> None:
    """100 subscriptions (~25 KB of state) and a 256-byte client id: neither fits OffsetCommit
    metadata nor a group id; the session topic keeps them through a kill -9 of the bridge."""
    acl = tmp_path / "acl"
    acl.write_text("topic read #\n")
    bridge = start_bridge(request, tmp_path, server.bootstrap, "--acl-file", str(acl))
    cid = "d" * 256
    dev = V5Device(cid, bridge.port)
    request.addfinalizer(dev.c.loop_stop)
    dev.connect()
    assert dev.connack[-1] == (False, 0)
    filters = [f"fleet/{i:03d}/" + "x" * 200 + "/#" for i in range(99)] + [f"devices/{cid}/commands"]
    granted = dev.subscribe(filters[:50]) + dev.subscribe(filters[50:])
    assert granted == [1] * 100
    wait_until(lambda: len((stored_session(server.bootstrap, cid) or {}).get("subs", {})) == 100, what="the session saved with its 100 subscriptions", timeout=20.0)
    assert len(json.dumps(stored_session(server.bootstrap, cid))) > 20_000
    bridge.kill9()
    dev.c.loop_stop()
    bridge.start()

    dev2 = V5Device(cid, bridge.port)
    request.addfinalizer(dev2.c.loop_stop)
    dev2.connect()
    assert dev2.connack[-1] == (True, 0), "session not present after kill -9 and restart"
    p = KafkaProducer(bootstrap_servers=server.bootstrap)
    p.send("commands", key=cid.encode(), value=b"after-restart").get(10)
    p.close()
    wait_until(lambda: dev2.got, what="the command through the restored subscription", timeout=20.0)
    assert dev2.got == [(f"devices/{cid}/commands", b"after-restart")]
    dev2.stop()
    out = bridge.output()
    assert "cannot save session" not in out


def test_session_size_limit_refuses_subscriptions_with_quota_exceeded(request, tmp_path, server) -> None:
    acl = tmp_path / "acl"
    acl.write_text("topic read #\n")
    bridge = start_bridge(request, tmp_path, server.bootstrap, "--acl-file", str(acl),
                          "--max-session-bytes", "4096")
    dev = V5Device("small-store", bridge.port)
    request.addfinalizer(dev.c.loop_stop)
    dev.connect()
    reasons = dev.subscribe([f"area/{i}/" + "y" * 300 for i in range(20)])
    assert reasons[:5] == [1] * 5
    assert 0x97 in reasons, reasons  # Quota exceeded for what would not fit
    granted = sum(1 for r in reasons if r == 1)
    wait_until(lambda: len((stored_session(server.bootstrap, "small-store") or {}).get("subs", {}))
               == granted, what="the session saved with every granted subscription", timeout=20.0)
    dev.stop()
    assert "cannot save session" not in bridge.output()


def _stats_failures(out: str) -> list[int]:
    return [int(m) for m in re.findall(r"session_save_failures[\"'=: ]+(\d+)", out)]


def test_a_session_that_cannot_be_saved_is_an_error_counted_not_retried(request, tmp_path, server) -> None:
    """The group store cannot hold ~25 KB of subscriptions (OffsetCommit metadata cap): the
    bridge logs an error, counts it in the stats, and does not retry every second."""
    acl = tmp_path / "acl"
    acl.write_text("topic read #\n")
    bridge = start_bridge(request, tmp_path, server.bootstrap, "--acl-file", str(acl),
                          "--session-store", "group", "--log-format", "json")
    dev = V5Device("big-in-group", bridge.port)
    request.addfinalizer(dev.c.loop_stop)
    dev.connect()
    assert dev.subscribe([f"site/{i}/" + "z" * 200 for i in range(100)]) == [1] * 100
    wait_until(lambda: "cannot save session big-in-group" in bridge.output(), what="the save error", timeout=20.0)
    # two stats lines after the error (5 s apart): the counter did not keep growing
    wait_until(lambda: len([n for n in _stats_failures(bridge.output()) if n > 0]) >= 2, timeout=30, what="two stats lines with the failure counted")
    counts = [n for n in _stats_failures(bridge.output()) if n > 0]
    assert counts[-1] == counts[0], counts
    assert bridge.output().count("cannot save session big-in-group") == counts[-1]
    dev.stop()


def test_311_persistent_session_expires_after_the_configured_time(request, tmp_path, server) -> None:
    bridge = start_bridge(request, tmp_path, server.bootstrap, "--persistent-client-expiration-s", "1")
    present: list[bool] = []
    ev = threading.Event()

    def on_connect(c, u, flags, rc, props) -> None:
        present.append(bool(flags.session_present))
        ev.set()

    c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="old-311", protocol=paho.MQTTv311,
                    clean_session=False)
    c.on_connect = on_connect
    request.addfinalizer(c.loop_stop)
    c.connect(HOST, bridge.port)
    c.loop_start()
    assert ev.wait(10)
    c.subscribe("devices/old-311/commands", 1)
    wait_until(lambda: stored_session(server.bootstrap, "old-311"), what="the saved session", timeout=20.0)
    # back within the time: the session is there
    c.disconnect()
    c.loop_stop()
    ev.clear()
    c.reconnect()
    c.loop_start()
    assert ev.wait(10)
    assert present == [False, True]
    c.disconnect()
    c.loop_stop()
    wait_until(lambda: "session old-311 expired" in bridge.output(), what="the expiry", timeout=20.0)
    wait_until(lambda: stored_session(server.bootstrap, "old-311") is None, what="the tombstone", timeout=20.0)
    ev.clear()
    c.reconnect()
    c.loop_start()
    assert ev.wait(10)
    assert present == [False, True, False]
    c.disconnect()
    c.loop_stop()
