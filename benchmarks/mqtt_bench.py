"""``python -m benchmarks.mqtt_bench``: mqtt-bridge next to mosquitto, same load generator.

Two workloads, each run against the bridge (in front of logserver, started here) and
against Debian's mosquitto (QoS 1, persistence off), printed side by side as ratios:

- ``publish``: QoS 1 publish throughput end to end. D devices, each keeping W PUBLISHes
  in flight; a message counts when its PUBACK arrives (for the bridge: after the log
  acknowledged the write with acks=all).
- ``fanout``: N devices subscribed (QoS 1) to ``ota``; K notices, one at a time; the
  latency of a notice is from its publish until the last device has it. The bridge's
  notices are produced to the Kafka topic ``ota`` (the backend's path: log write, then
  fetch and fan-out); mosquitto's are MQTT PUBLISHes to ``ota``.

The load generator is ``mqtt_bridge.aclient`` (asyncio, one process) for both servers.
Every process started here is stopped by pid at the end, also on failure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mqtt_bridge.aclient import MqttClient, connect_many
from mqtt_bridge.kafka_client import KafkaClient
from mqtt_bridge.kafka_producer import Producer
from mqtt_bridge.testing import HOST, BridgeProcess, MosquittoProcess

from .targets import LogserverTarget

log = logging.getLogger(__name__)


async def publish_workload(port: int, devices: int, window: int, total: int, size: int,
                           cap_s: float) -> dict[str, Any]:
    clients = await connect_many(HOST, port, [f"bench-pub-{i}" for i in range(devices)])
    payload = b"x" * size
    per_device = total // devices
    acked = 0
    t0 = time.perf_counter()
    deadline = t0 + cap_s

    async def run(c: MqttClient) -> None:
        nonlocal acked
        topic = f"devices/{c.client_id}/telemetry"
        sent = 0
        pending: set[asyncio.Future[Any]] = set()
        while sent < per_device and time.perf_counter() < deadline:
            while len(pending) < window and sent < per_device:
                fut = c.publish(topic, payload, 1)
                assert fut is not None
                pending.add(fut)
                sent += 1
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            acked += len(done)
        if pending:
            await asyncio.wait(pending, timeout=30)
            acked += sum(1 for f in pending if f.done())

    await asyncio.gather(*(run(c) for c in clients))
    elapsed = time.perf_counter() - t0
    await asyncio.gather(*(c.disconnect() for c in clients))
    return {"messages": acked, "seconds": round(elapsed, 3),
            "msgs_per_s": round(acked / elapsed, 1), "capped": acked < per_device * devices}


async def fanout_workload(port: int, subscribers: int, notices: int, size: int,
                          send: Any) -> dict[str, Any]:
    """``send(payload)`` publishes one notice by the server's own path."""
    got: dict[int, list[float]] = {}
    waiters: dict[int, asyncio.Event] = {}

    def on_message(p: Any, now: float) -> None:
        if len(p.payload) >= 4 and p.payload[:2] == b"N:":
            n = int(p.payload[2:].split(b":")[0])
            lst = got.setdefault(n, [])
            lst.append(now)
            if len(lst) == subscribers:
                waiters[n].set()

    clients: list[MqttClient] = []
    for i in range(0, subscribers, 200):
        ids = [f"bench-sub-{j}" for j in range(i, min(i + 200, subscribers))]
        clients += await connect_many(HOST, port, ids, on_message=on_message)
    await asyncio.gather(*(c.subscribe("ota", qos=1) for c in clients))
    await asyncio.sleep(0.5)
    latencies: list[float] = []
    first: list[float] = []
    for n in range(-2, notices):  # two warm-up notices
        waiters[n] = asyncio.Event()
        body = f"N:{n}:".encode().ljust(size, b"f")
        t0 = time.monotonic()
        await send(body)
        try:
            await asyncio.wait_for(waiters[n].wait(), 30)
        except TimeoutError:
            log.warning("notice %d reached %d of %d", n, len(got.get(n, [])), subscribers)
            continue
        if n >= 0:
            latencies.append(max(got[n]) - t0)
            first.append(min(got[n]) - t0)
        await asyncio.sleep(0.05)
    await asyncio.gather(*(c.disconnect() for c in clients))
    return {
        "subscribers": subscribers,
        "notices": len(latencies),
        "all_p50_ms": round(statistics.median(latencies) * 1000, 2) if latencies else None,
        "all_max_ms": round(max(latencies) * 1000, 2) if latencies else None,
        "first_p50_ms": round(statistics.median(first) * 1000, 2) if first else None,
        "deliveries_per_s": round(subscribers / statistics.median(latencies), 1) if latencies else None,
    }


async def run_all(args: argparse.Namespace, bridge_port: int, bootstrap: str,
                  mosq_port: int | None) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name, port in (("bridge", bridge_port), ("mosquitto", mosq_port)):
        if port is None:
            continue
        log.info("publish workload against %s", name)
        results[f"publish/{name}"] = await publish_workload(
            port, args.devices, args.window, args.messages, args.size, args.time_cap)
    client = KafkaClient(bootstrap)
    producer = Producer(client, linger_ms=0)
    producer.start()

    async def kafka_send(body: bytes) -> None:
        await producer.send("ota", None, body)

    mosq_pub: MqttClient | None = None
    if mosq_port is not None:
        mosq_pub = MqttClient("bench-ota-pub")
        await mosq_pub.connect(HOST, mosq_port)

    async def mqtt_send(body: bytes) -> None:
        assert mosq_pub is not None
        fut = mosq_pub.publish("ota", body, 1)
        assert fut is not None

    for n in args.fanout:
        log.info("fan-out workload, %d subscribers, against bridge", n)
        results[f"fanout{n}/bridge"] = await fanout_workload(bridge_port, n, args.notices, args.size, kafka_send)
        if mosq_port is not None:
            log.info("fan-out workload, %d subscribers, against mosquitto", n)
            results[f"fanout{n}/mosquitto"] = await fanout_workload(mosq_port, n, args.notices, args.size, mqtt_send)
    await producer.close()
    await client.close()
    if mosq_pub is not None:
        await mosq_pub.disconnect()
    return results


def report(results: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [f"MQTT bridge vs mosquitto (same load generator; payload {args.size} B)", ""]
    p_b, p_m = results.get("publish/bridge"), results.get("publish/mosquitto")
    lines.append(f"{'workload':34} {'bridge':>14} {'mosquitto':>14} {'bridge/mosq':>12}")
    if p_b:
        ratio = f"{p_b['msgs_per_s'] / p_m['msgs_per_s']:.2f}" if p_m else "-"
        mq = f"{p_m['msgs_per_s']:,.0f}" if p_m else "-"
        lines.append(f"{'QoS1 publish msgs/s (PUBACKed)':34} {p_b['msgs_per_s']:>14,.0f} {mq:>14} {ratio:>12}")
    for n in args.fanout:
        b, m = results.get(f"fanout{n}/bridge"), results.get(f"fanout{n}/mosquitto")
        for key, label in (("all_p50_ms", "to all, p50 ms"), ("all_max_ms", "to all, max ms"),
                           ("first_p50_ms", "to first, p50 ms")):
            bv = b.get(key) if b else None
            mv = m.get(key) if m else None
            ratio = f"{bv / mv:.2f}" if bv and mv else "-"
            lines.append(f"{f'fan-out {n} devices, {label}':34} {bv if bv is not None else '-':>14} "
                         f"{mv if mv is not None else '-':>14} {ratio:>12}")
    lines.append("")
    lines.append("publish: higher is better; fan-out latency: lower is better (ratio > 1 = bridge slower).")
    lines.append("The bridge's publish path includes the log write (acks=all) before each PUBACK;")
    lines.append("its fan-out path includes the Kafka produce, the log append and the fetch.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.mqtt_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--devices", type=int, default=50, help="publishing devices (default 50)")
    p.add_argument("--window", type=int, default=20, help="QoS 1 PUBLISHes in flight per device (default 20)")
    p.add_argument("--messages", type=int, default=100_000, help="messages in the publish workload (default 100,000)")
    p.add_argument("--size", type=int, default=100, help="payload bytes (default 100)")
    p.add_argument("--time-cap", type=float, default=20.0, help="seconds cap per publish run (default 20)")
    p.add_argument("--fanout", type=int, nargs="+", default=[100, 1000], help="subscriber counts (default 100 1000)")
    p.add_argument("--notices", type=int, default=20, help="notices per fan-out run (default 20)")
    p.add_argument("--quick", action="store_true", help="smoke run: 10,000 messages, fan-out to 100 devices")
    p.add_argument("--no-mosquitto", action="store_true", help="bridge only")
    p.add_argument("--output", type=Path, default=Path(__file__).resolve().parent / "results" / "mqtt.json")
    args = p.parse_args(argv)
    if args.quick:
        args.messages, args.fanout, args.notices = 10_000, [100], 5
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    mosquitto = None if args.no_mosquitto else shutil.which("mosquitto") or (
        "/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").exists() else None)
    if mosquitto is None and not args.no_mosquitto:
        log.warning("mosquitto not found (apt-get install mosquitto): bridge only")
    with tempfile.TemporaryDirectory(prefix="mqtt-bench-") as tmp:
        work = Path(tmp)
        logserver = LogserverTarget(work, ["--num.partitions", "3"])
        bridge: BridgeProcess | None = None
        mosq: MosquittoProcess | None = None
        try:
            bootstrap = logserver.start()
            bridge = BridgeProcess(bootstrap, work / "bridge.log", "--log-level", "WARNING",
                                   "--max-connection-rate", "100000")
            bridge.start()
            if mosquitto is not None:
                mosq = MosquittoProcess(work / "mosquitto", mosquitto)
                mosq.start()
            try:
                import uvloop

                runner: Any = uvloop.run
            except ImportError:
                runner = asyncio.run
            results = runner(run_all(args, bridge.port, bootstrap, mosq.port if mosq else None))
        finally:
            for proc in (bridge, mosq):
                if proc is not None:
                    proc.stop()
            with contextlib.suppress(Exception):
                logserver.stop()
    sys.stdout.write(report(results, args) + "\n")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"settings": {k: v for k, v in vars(args).items() if k != "output"},
                                       "results": results}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
