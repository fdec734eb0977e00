"""HTTP produce through the built-in REST Proxy vs kafka-python and the MQTT bridge
producing the same records.

The records are small JSON uplinks keyed by one of 100 device ids, as a webhook posts them.
``rest``: one ``requests.Session`` (keep-alive) POSTing ``--per-request`` records per
request to ``/topics/{topic}`` (JSON format), one request at a time, as a webhook sender
does. ``kafka-python``: KafkaProducer (acks=all, its default batching) sending the same
records, flushed at the end of the window. ``bridge``: one MQTT client publishing each
uplink at QoS 1 to ``devices/{device}/telemetry`` through an mqtt-bridge (its default rule
writes it to ``telemetry`` keyed by the device), one PUBLISH in flight, as a device or a
webhook relay does; its CPU is the server's plus the bridge's. Each run starts a fresh server (its own data
directory); the clients take turns going first run by run (``--runs``, default 3). Figures
are records acknowledged per second and the server's CPU per record (utime + stime over
the measured window, /proc), printed as min / median / max.

    python -m benchmarks.rest_proxy_bench --runs 3 --seconds 5
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import requests
from helpers.mqtt_client import MqttClient
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from commonlib.childproc import free_port

from .mqtt_multi import start_bridges
from .stats import Spread
from .targets import LogserverTarget, cpu_seconds

TOPIC = "telemetry"
PARTITIONS = 3
WARMUP_S = 1.0
DEVICES = [f"eui-70b3d57ed00{i:05d}" for i in range(100)]


def uplink(n: int) -> tuple[str, dict[str, object]]:
    """The ``n``-th record: (device id, ~150 B JSON uplink)."""
    device = DEVICES[n % len(DEVICES)]
    return device, {"device_id": device, "f_cnt": n, "f_port": 1, "frm_payload": "AQIDBA==",
                    "decoded": {"temperature": 20 + n % 10, "humidity": 40 + n % 30}}


def run_rest(url: str, seconds: float, per_request: int) -> int:
    """Records acknowledged in ``seconds`` of keep-alive POSTs."""
    done = 0
    headers = {"Content-Type": "application/vnd.kafka.json.v2+json"}
    with requests.Session() as session:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            records = [uplink(done + i) for i in range(per_request)]
            body = json.dumps({"records": [{"key": k, "value": v} for k, v in records]})
            response = session.post(url, data=body, headers=headers, timeout=30)
            response.raise_for_status()
            offsets = response.json()["offsets"]
            if any(o["error_code"] is not None for o in offsets):
                raise RuntimeError(f"produce failed: {offsets}")
            done += len(offsets)
    return done


def run_kafka_python(bootstrap: str, seconds: float) -> int:
    """Records acknowledged in ``seconds`` by kafka-python (JSON bytes as the proxy writes)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    try:
        sent = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for _ in range(100):
                key, value = uplink(sent)
                producer.send(TOPIC, key=json.dumps(key).encode(),
                              value=json.dumps(value, separators=(",", ":")).encode())
                sent += 1
        producer.flush(timeout=60)
        return sent
    finally:
        producer.close(timeout=10)


def run_bridge(port: int, seconds: float) -> int:
    """Records acknowledged (PUBACK after the log's acks=all) in ``seconds``."""
    async def publish() -> int:
        client = MqttClient("rest-proxy-bench")
        await client.connect("127.0.0.1", port)
        done = 0
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                device, value = uplink(done)
                acked = client.publish(f"devices/{device}/telemetry",
                                       json.dumps(value, separators=(",", ":")).encode(), qos=1)
                assert acked is not None
                await asyncio.wait_for(acked, 30)
                done += 1
        finally:
            await client.disconnect()
        return done
    return asyncio.run(publish())


def one_run(client: str, seconds: float, per_request: int) -> tuple[float, float]:
    """(records/s, server CPU µs per record) of one run on a fresh server."""
    with tempfile.TemporaryDirectory(prefix="rest-proxy-bench-") as tmp, \
            contextlib.ExitStack() as stack:
        rest_port = free_port()
        target = LogserverTarget(Path(tmp), ["--rest.proxy.listeners", f"http://127.0.0.1:{rest_port}",
                                             "--admin.listeners", ""])
        with target as server:
            bootstrap = server.bootstrap
            assert bootstrap is not None
            admin = KafkaAdminClient(bootstrap_servers=bootstrap)
            try:
                admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
            finally:
                admin.close()
            url = f"http://127.0.0.1:{rest_port}/topics/{TOPIC}"
            work: Callable[[float], int]
            extra_pids: list[int] = []
            if client == "rest":
                def work(s: float) -> int:
                    return run_rest(url, s, per_request)
            elif client == "bridge":
                (bridge,) = start_bridges(1, bootstrap, Path(tmp), "--log-level", "WARNING")
                stack.callback(bridge.stop)
                assert bridge.proc is not None and bridge.port is not None
                extra_pids.append(bridge.proc.pid)
                mqtt_port = bridge.port

                def work(s: float) -> int:
                    return run_bridge(mqtt_port, s)
            else:
                def work(s: float) -> int:
                    return run_kafka_python(bootstrap, s)
            work(WARMUP_S)
            pid = server.pid()
            assert pid is not None
            pids = [pid, *extra_pids]
            cpu_before = sum(cpu_seconds(p) or 0.0 for p in pids)
            started = time.monotonic()
            records = work(seconds)
            elapsed = time.monotonic() - started
            cpu = sum(cpu_seconds(p) or 0.0 for p in pids) - cpu_before
            return records / elapsed, cpu / records * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds per run")
    parser.add_argument("--per-request", type=int, default=1,
                        help="records per HTTP request (a webhook posts one)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    clients = ("rest", "kafka-python", "bridge")
    rates: dict[str, list[float]] = {c: [] for c in clients}
    cpus: dict[str, list[float]] = {c: [] for c in clients}
    for run in range(args.runs):
        for client in clients[run % 3:] + clients[:run % 3]:
            rate, cpu = one_run(client, args.seconds, args.per_request)
            rates[client].append(rate)
            cpus[client].append(cpu)
            print(f"  run {run + 1} {client:12}: {rate:,.0f} records/s, "
                  f"{cpu:,.1f} µs server CPU/record", flush=True)
    for client in clients:
        r, c = Spread.of(rates[client]), Spread.of(cpus[client])
        print(f"{client:12} records/s min {r.low:,.0f} / median {r.median:,.0f} / max {r.high:,.0f}; "
              f"server CPU µs/record min {c.low:,.1f} / median {c.median:,.1f} / max {c.high:,.1f} "
              f"({r.runs} runs)")


if __name__ == "__main__":
    main()
