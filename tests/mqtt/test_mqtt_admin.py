"""The MQTT bridge's admin listener (``--admin-listen``): /metrics and /v1/status with
real paho-mqtt devices publishing through a real bridge into a real logserver."""

from __future__ import annotations

import json
import urllib.request
import uuid

import paho.mqtt.client as paho
from helpers.mqtt_procs import HOST, BridgeProcess
from helpers.serverproc import free_port
from helpers.waiting import wait_until
from prometheus_client.parser import text_string_to_metric_families

DEVICES = 5
PER_DEVICE = 4


def scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    return {s.name: s.value for family in text_string_to_metric_families(text)
            for s in family.samples}


def test_metrics_count_connected_devices_and_publishes(request, module_server, tmp_path) -> None:
    admin_port = free_port()
    bridge = BridgeProcess(module_server.bootstrap, tmp_path / "bridge.log", "--log-format", "text",
                           "--uplink-topic", "telemetry*", "--admin-listen", f"{HOST}:{admin_port}")
    request.addfinalizer(bridge.stop)
    bridge.start()
    url = f"http://{HOST}:{admin_port}"
    before = scrape(url)
    assert before["mqtt_connected_devices"] == 0
    stream = "telemetry" + uuid.uuid4().hex[:6]
    clients = []
    try:
        for i in range(DEVICES):
            client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"meter-{i}")
            client.connect(HOST, bridge.port, keepalive=30)
            client.loop_start()
            clients.append(client)
        wait_until(lambda: scrape(url)["mqtt_connected_devices"] == DEVICES, what="devices connected", timeout=20.0)
        for i, client in enumerate(clients):
            for n in range(PER_DEVICE):
                client.publish(f"devices/meter-{i}/{stream}", f"{n}", qos=1).wait_for_publish(10)
        after = wait_until(lambda: (s := scrape(url))["mqtt_uplink_records_acked_total"]
                         - before["mqtt_uplink_records_acked_total"] >= DEVICES * PER_DEVICE and s, what="uplink acknowledged", timeout=20.0)
        assert after["mqtt_publishes_in_total"] - before["mqtt_publishes_in_total"] == DEVICES * PER_DEVICE
        assert after["mqtt_uplink_records_total"] - before["mqtt_uplink_records_total"] == DEVICES * PER_DEVICE
        with urllib.request.urlopen(url + "/v1/status", timeout=10) as response:
            status = json.loads(response.read())
        assert status["connections"] == DEVICES
    finally:
        for client in clients:
            client.disconnect()
            client.loop_stop()
    wait_until(lambda: scrape(url)["mqtt_connected_devices"] == 0, what="devices gone", timeout=20.0)


def samples(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_puback_latency_and_dropped_messages(request, module_server, tmp_path) -> None:
    """Every QoS 1 and QoS 2 PUBLISH is one PUBACK-latency observation; a client that
    stops acknowledging makes its full queue drop messages, counted as the status says."""
    import asyncio

    from helpers.mqtt_client import MqttClient
    from kafka import KafkaProducer

    admin_port = free_port()
    bridge = BridgeProcess(module_server.bootstrap, tmp_path / "bridge.log", "--log-format", "text",
                           "--uplink-topic", "telemetry*", "--max-queued", "5",
                           "--max-inflight", "1", "--admin-listen", f"{HOST}:{admin_port}")
    request.addfinalizer(bridge.stop)
    bridge.start()
    url = f"http://{HOST}:{admin_port}"
    count = "mqtt_puback_latency_seconds_count", ()
    before = samples(url)
    stream = "telemetry" + uuid.uuid4().hex[:6]
    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="timed-1")
    client.connect(HOST, bridge.port, keepalive=30)
    client.loop_start()
    try:
        for n in range(6):
            client.publish(f"devices/timed-1/{stream}", f"{n}", qos=1 + n % 2).wait_for_publish(10)
        client.publish(f"devices/timed-1/{stream}", "fire and forget", qos=0).wait_for_publish(10)
    finally:
        client.disconnect()
        client.loop_stop()
    after = samples(url)
    assert after[count] - before[count] == 6  # QoS 0 has no PUBACK
    inf = "mqtt_puback_latency_seconds_bucket", (("le", "+Inf"),)
    assert after[inf] == after[count]
    assert after[("mqtt_puback_latency_seconds_sum", ())] > before.get(
        ("mqtt_puback_latency_seconds_sum", ()), 0.0)

    async def stall() -> None:
        slow = MqttClient("slow-9", version=5, auto_ack=False)
        assert (await slow.connect(HOST, bridge.port, properties={"receive_maximum": 1})).reason == 0
        assert await slow.subscribe("devices/slow-9/commands", qos=1) == [1]
        producer = KafkaProducer(bootstrap_servers=module_server.bootstrap)
        for i in range(30):
            producer.send("commands", key=b"slow-9", value=f"cmd {i}".encode())
        producer.flush()
        producer.close()
        dropped = ("mqtt_messages_dropped_total", (("reason", "queue_full"),))
        seen = await asyncio.to_thread(
            wait_until, lambda: (s := samples(url))[dropped] >= 24 and s, 20.0, "queue drops")
        with urllib.request.urlopen(url + "/v1/status", timeout=10) as response:
            status = json.loads(response.read())
        # 30 = 5 queued + 1 in flight (when it left the queue before the rest arrived) + dropped
        assert seen[dropped] in (24, 25) and status["queued_dropped"] == seen[dropped]
        await slow.disconnect()

    asyncio.run(stall())
