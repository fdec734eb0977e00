"""The dashboard's page, assets and event stream over plain HTTP, with a bridge run on its
own (``mqtt-bridge --admin-listen``) named by ``admin.mqtt.bridge.url``: its connected
paho device shows in the stream. (The page in a real browser: test_dashboard_browser.py.)
"""

from __future__ import annotations

import urllib.error
import urllib.request

import paho.mqtt.client as paho
import pytest
from helpers.admin_http import events
from helpers.mqtt_procs import HOST, BridgeProcess

from commonlib.childproc import free_port

pytestmark = pytest.mark.timeout(120)


def fetch(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read()


def test_page_assets_and_a_standalone_bridges_devices(request, server_factory, tmp_path) -> None:
    bridge_admin = free_port()
    server = server_factory(settings={"admin.mqtt.bridge.url": f"http://{HOST}:{bridge_admin}"})
    base = server.admin_url
    for path in ("/", "/dashboard"):
        status, kind, body = fetch(base + path)
        assert status == 200 and kind.startswith("text/html") and b"dashboard.js" in body
    status, kind, body = fetch(base + "/dashboard/static/dashboard.js")
    assert status == 200 and kind.startswith("text/javascript") and b"EventSource" in body
    assert fetch(base + "/dashboard/static/dashboard.css")[1].startswith("text/css")
    assert fetch(base + "/dashboard/static/../http.py")[0] == 404
    assert fetch(base + "/dashboard/static/nope.js")[0] == 404

    bridge = BridgeProcess(server.bootstrap, tmp_path / "bridge.log", "--log-format", "text",
                           "--admin-listen", f"{HOST}:{bridge_admin}")
    request.addfinalizer(bridge.stop)
    bridge.start()
    device = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="solo-7")
    device.connect(HOST, bridge.port)
    device.loop_start()
    try:
        stream = events(base + "/dashboard/events")
        name, history = next(stream)
        assert name == "history" and isinstance(history, list)  # empty just after start
        for seen, (name, sample) in enumerate(stream):  # one a second
            assert name == "message" and seen < 30, sample
            devices = sample["devices"]
            if devices and devices["reachable"] and devices["connected"] == 1:
                break
        assert [c["client_id"] for c in devices["clients"]] == ["solo-7"]
        assert devices["sessions"] == 1
    finally:
        device.disconnect()
        device.loop_stop()


def test_devices_stay_visible_over_a_bridge_restart(server_factory) -> None:
    """``--mqtt-bridge``: the server holds the child's admin socket, so a restarted bridge
    answers the dashboard at the same address; the reconnected device shows again."""
    import os
    import re
    import signal
    import time

    from commonlib.childproc import can_connect

    mqtt_port = free_port()
    server = server_factory(extra_args=["--mqtt-bridge", f"{HOST}:{mqtt_port}"])

    def bridge_pids() -> list[int]:
        return [int(p) for p in re.findall(r"started mqtt-bridge \(pid (\d+)\)", server.output())]

    def device_shown(newer_than: float | None = None) -> dict:
        for seen, (name, sample) in enumerate(events(server.admin_url + "/dashboard/events")):
            assert seen < 40, sample
            if name == "history":
                continue
            devices = sample["devices"]
            if (devices and devices["reachable"] and devices["connected"] == 1
                    and (newer_than is None
                         or devices["clients"][0]["connected_s"] < time.monotonic() - newer_than)):
                return devices
        raise AssertionError("the event stream ended")

    deadline = time.monotonic() + 30
    while not can_connect(mqtt_port):
        assert time.monotonic() < deadline, "the bridge does not listen"
        time.sleep(0.05)
    device = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="keeps-1")
    device.reconnect_delay_set(min_delay=1, max_delay=1)
    device.connect(HOST, mqtt_port)
    device.loop_start()  # reconnects by itself once the bridge is back
    try:
        assert [c["client_id"] for c in device_shown()["clients"]] == ["keeps-1"]
        (first,) = bridge_pids()
        os.kill(first, signal.SIGKILL)
        killed = time.monotonic()
        shown = device_shown(newer_than=killed)
        assert [c["client_id"] for c in shown["clients"]] == ["keeps-1"]
        assert len(bridge_pids()) == 2
    finally:
        device.disconnect()
        device.loop_stop()
