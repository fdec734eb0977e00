"""The MQTT bridge in front of a 3-broker cluster: devices publish QoS 1 while the
leader of the uplink topic is killed with kill -9; every PUBACKed message is in the log
exactly once afterwards, for QoS 1 and QoS 2 (real etcd, brokers, bridge and MQTT clients, 127.0.0.1)."""

from __future__ import annotations

import asyncio
import time

import pytest
from helpers.cluster_clients import consume_all, create
from helpers.clusterprocs import running_cluster
from helpers.mqtt_client import MqttClient, connect_many
from helpers.mqtt_procs import HOST, BridgeProcess
from helpers.waiting import wait_until

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path):
    with running_cluster(tmp_path, 3, **{"min.insync.replicas": 2,
                                          "default.replication.factor": 3}) as nodes:
        yield nodes


@pytest.mark.parametrize("qos", [1, 2])
def test_bridge_loses_no_pubacked_message_through_a_leader_kill(tmp_path, cluster, qos):
    """QoS 1: every PUBACKed message is in the log; QoS 2: every PUBCOMPed one, exactly
    once (the bridge's idempotent producer keeps its retries from duplicating)."""
    stream = "uplink"
    create(cluster, stream, partitions=1, rf=3)
    bridge = BridgeProcess(cluster.bootstrap, tmp_path / "bridge.log", "--log-format", "text",
                           "--delivery-timeout-s", "60", "--uplink-topic", stream)
    bridge.start()
    acked: list[str] = []
    ack_times: list[float] = []
    killed: dict[str, float] = {}

    async def device(c: MqttClient, stop: asyncio.Event) -> None:
        seq = 0
        window: set[asyncio.Future] = set()
        while not stop.is_set():
            payload = f"{c.client_id}:{seq:06d}"
            future = c.publish(f"devices/{c.client_id}/{stream}", payload.encode(), qos)

            def done(f: asyncio.Future, payload: str = payload) -> None:
                if not f.cancelled() and f.exception() is None:
                    acked.append(payload)
                    ack_times.append(time.monotonic())

            future.add_done_callback(done)
            window.add(future)
            seq += 1
            if len(window) >= 5:
                _, window = await asyncio.wait(window, return_when=asyncio.FIRST_COMPLETED)
        if window:
            await asyncio.wait(window, timeout=60)

    async def run() -> None:
        clients = await connect_many(HOST, bridge.port, [f"d{i}" for i in range(5)])
        stop = asyncio.Event()
        tasks = [asyncio.create_task(device(c, stop)) for c in clients]
        deadline = time.monotonic() + 30
        while len(acked) < 100 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        leader = cluster.partition(stream, 0).leader
        cluster.brokers[leader].kill9()
        killed["at"] = time.monotonic()
        deadline = time.monotonic() + 60  # PUBACKs resume once the new leader took over
        while not sum(t > killed["at"] + 0.5 for t in ack_times) > 100 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 90)
        for c in clients:
            await c.disconnect()

    try:
        asyncio.run(run())
    finally:
        assert bridge.stop() == 0, bridge.tail()
    after = sum(t > killed["at"] + 0.5 for t in ack_times)
    assert after > 100, f"only {after} PUBACKs after the kill: the bridge did not fail over"
    wait_until(lambda: cluster.partition(stream, 0).leader not in (-1, None), 30, "a leader")
    records = consume_all(cluster.bootstrap, stream, len(acked), timeout=60)
    values = [value.decode() for _, value in records]
    assert len(set(values)) == len(values), "duplicates in the log"
    missing = set(acked) - set(values)
    assert not missing, f"{len(missing)} PUBACKed messages missing, e.g. {sorted(missing)[:5]}"
