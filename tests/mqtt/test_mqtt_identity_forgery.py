"""A device cannot pose as another one: not through MQTT 5 User Properties that mimic the
bridge's identity headers, and not through a client id that forges log lines. Real
clients: paho-mqtt 5 and Debian's mosquitto_sub against a real bridge and log server."""

from __future__ import annotations

import json
import uuid

import paho.mqtt.client as paho
import pytest
from helpers.clienthelpers import kp_read
from helpers.mqtt_procs import HOST, BridgeProcess
from helpers.waiting import wait_until
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(params=["text", "json"])
def bridge(request, server, tmp_path) -> BridgeProcess:
    b = BridgeProcess(server.bootstrap, tmp_path / "bridge.log", "--log-format", request.param)
    request.addfinalizer(b.stop)
    b.start()
    b.log_format = request.param  # type: ignore[attr-defined]
    return b


def _paho_v5(client_id: str) -> paho.Client:
    return paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=client_id,
                       protocol=paho.MQTTv5)


def test_user_properties_cannot_add_or_shadow_the_bridges_identity_headers(bridge, server):
    attacker = "attacker-" + uuid.uuid4().hex[:6]
    props = Properties(PacketTypes.PUBLISH)
    props.UserProperty = [("mqtt.client_id", "victim"), ("mqtt.topic", "devices/victim/telemetry"),
                          ("MQTT.Client_Id", "victim"), ("fw", "1.2")]
    client = _paho_v5(attacker)
    client.connect(HOST, bridge.port)
    client.loop_start()
    try:
        info = client.publish(f"devices/{attacker}/telemetry", b"21.5", qos=1, properties=props)
        info.wait_for_publish(timeout=20)
        assert info.is_published()
    finally:
        client.disconnect()
        client.loop_stop()

    (record,) = wait_until(lambda: [r for r in kp_read(server.bootstrap, "telemetry")
                                    if r.key == attacker.encode()], 30, "the record")
    names = [name for name, _ in record.headers]
    assert names.count("mqtt.client_id") == 1 and names.count("mqtt.topic") == 1
    assert not [n for n in names if n.lower().startswith("mqtt.") and n not in
                ("mqtt.client_id", "mqtt.topic")]
    headers = dict(record.headers)  # the last of each name, as Java's lastHeader()
    assert headers["mqtt.client_id"] == attacker.encode()
    assert headers["mqtt.topic"] == f"devices/{attacker}/telemetry".encode()
    # kept, under the user namespace, so nothing the device sent is lost
    assert headers["user.mqtt.client_id"] == b"victim"
    assert headers["user.MQTT.Client_Id"] == b"victim"
    assert headers["user.mqtt.topic"] == b"devices/victim/telemetry"
    assert headers["fw"] == b"1.2"


def _connect_v5(bridge: BridgeProcess, client_id: str) -> paho.Client:
    """A paho MQTT 5 client connected with ``client_id`` (mosquitto's own clients refuse to
    send control characters; a hostile device is not so polite)."""
    client = _paho_v5(client_id)
    connected = []
    client.on_connect = lambda c, userdata, flags, reason, props: connected.append(reason)
    client.connect(HOST, bridge.port)
    client.loop_start()
    wait_until(lambda: connected, 30, "the CONNACK")
    assert not connected[0].is_failure, connected
    return client


def test_a_client_id_with_a_newline_cannot_forge_a_log_line(bridge):
    client_id = "dev\n2026-01-01 00:00:00,000 INFO mqtt_bridge.bridge: admin logged in\x1b[2J"
    clients = []
    try:
        clients.append(_connect_v5(bridge, client_id))
        # the same id again: the bridge logs the takeover, naming the client id
        clients.append(_connect_v5(bridge, client_id))
        wait_until(lambda: "taken over" in bridge.output(), 30, "the takeover's log line")
    finally:
        for client in clients:
            client.disconnect()
            client.loop_stop()
    lines = bridge.output().splitlines()
    takeover = [line for line in lines if "taken over" in line]
    for line in lines:
        assert not line.startswith("2026-01-01"), f"forged line: {line!r}"
        assert "\x1b" not in line
        if bridge.log_format == "json" and line.startswith("{"):
            json.loads(line)  # every line is one whole object
    if bridge.log_format == "text":
        assert any("dev\\x0a2026-01-01" in line for line in takeover), takeover
    else:
        assert any("dev\n2026-01-01" in json.loads(line)["msg"] for line in takeover), takeover
