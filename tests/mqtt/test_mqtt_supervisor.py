"""``logserver --mqtt-bridge`` supervises its bridge child, with real processes: a bridge
killed with SIGKILL comes back (with a growing backoff) and serves MQTT again; a bridge
that cannot listen on its port makes the server exit non-zero with one clear line."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import time

import pytest
from helpers.clienthelpers import kp_read
from helpers.mqtt_client import MqttClient
from helpers.serverproc import HOST, ServerProcess, free_port

from commonlib.childproc import can_connect

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


def _bridge_pids(server: ServerProcess) -> list[int]:
    return [int(p) for p in re.findall(r"started mqtt-bridge \(pid (\d+)\)", server.output())]


def _wait(condition, timeout: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _publish_and_read_back(server: ServerProcess, mqtt_port: int, stream: str, payload: bytes) -> None:
    async def publish() -> None:
        client = MqttClient("sensor-1", version=5)
        await client.connect(HOST, mqtt_port)
        await asyncio.wait_for(client.publish(f"devices/sensor-1/{stream}", payload, 1), 20)
        await client.disconnect()

    asyncio.run(publish())
    records = _wait(lambda: [r for r in kp_read(server.bootstrap, stream) if r.value == payload],
                    30, f"{payload!r} in topic {stream}")
    assert [r.key for r in records] == [b"sensor-1"]


def test_killed_bridge_is_restarted_and_serves_again(server_factory) -> None:
    mqtt_port = free_port()
    server = server_factory(extra_args=["--mqtt-bridge", f"{HOST}:{mqtt_port}"])
    _wait(lambda: can_connect(mqtt_port), 30, "the bridge to listen")
    _publish_and_read_back(server, mqtt_port, "telemetry", b"first")
    for kill in range(2):
        (victim,) = _bridge_pids(server)[-1:]
        os.kill(victim, signal.SIGKILL)
        _wait(lambda n=kill + 2: len(_bridge_pids(server)) == n, 30, "a restarted bridge")
        _wait(lambda: can_connect(mqtt_port), 30, "the restarted bridge to listen")
        _publish_and_read_back(server, mqtt_port, "telemetry", b"again-%d" % kill)
    out = server.output()
    deaths = re.findall(r"mqtt-bridge \(pid (\d+)\) died \(killed by SIGKILL\); restarting it in "
                        r"([\d.]+) s", out)
    assert [int(pid) for pid, _ in deaths] == _bridge_pids(server)[:2], out
    first, second = (float(delay) for _, delay in deaths)
    # The backoff doubles from 0.5 s, each wait spread by the one Backoff's +-20 % jitter.
    assert 0.4 <= first <= 0.6 and 0.8 <= second <= 1.2, f"backoff doubles: {first}, {second}"
    assert server.running
    assert server.stop() == 0
    pids = _bridge_pids(server)
    assert len(set(pids)) == 3
    for pid in pids:  # every bridge is gone with the server
        assert not os.path.exists(f"/proc/{pid}"), f"bridge pid {pid} outlived the server"


def test_bridge_port_taken_stops_the_server_with_one_clear_line(server_factory) -> None:
    with socket.socket() as squatter:
        squatter.bind((HOST, 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        server = server_factory(extra_args=["--mqtt-bridge", f"{HOST}:{taken}"])
        assert server.proc is not None
        code = server.proc.wait(60)
    assert code == 4, server.output()
    out = server.output()
    lines = [line for line in out.splitlines() if "logserver.bridge_process" in line and "ERROR" in line]
    assert len(lines) == 1, out
    assert f"mqtt-bridge cannot listen on {HOST}:{taken}" in lines[0]
    assert "restarting" not in out  # no retry loop against a port that is taken
