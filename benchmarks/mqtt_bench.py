"""``python -m benchmarks.mqtt_bench``: mqtt-bridge next to peer MQTT servers, same load.

Two workloads, each run against the bridge (in front of logserver, started here) and
against each peer (mosquitto from Debian, rumqttd from PyPI ``iotcore``, amqtt from
PyPI), one server at a time, printed side by side as ratios:

- ``mqtt-publish-qos1``: QoS 1 publish throughput end to end. D devices, each keeping W
  PUBLISHes in flight; a message counts when its PUBACK arrives (for the bridge: after
  the log acknowledged the write with acks=all; the peers persist nothing).
- ``mqtt-fanout-N``: N devices subscribed (QoS 1) to ``ota``; K notices, one at a time;
  a notice's latency runs from its publish until the last device has it. The bridge's
  notices are produced to the Kafka topic ``ota`` (the backend's path: log write, then
  fetch and fan-out); the peers' are MQTT PUBLISHes to ``ota``. The server's resident
  memory with all N devices connected is recorded too.

The load generator is ``mqtt_bridge.aclient`` (asyncio, one process) for every server.
Every process started here is stopped by pid at the end, also on failure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqtt_bridge.aclient import MqttClient, connect_many
from mqtt_bridge.kafka_client import KafkaClient
from mqtt_bridge.kafka_producer import Producer
from mqtt_bridge.testing import HOST, BridgeProcess, ManagedProcess, MosquittoProcess

from .peers import PeerUnavailable, ensure_amqtt, ensure_rumqttd
from .progress import NULL_PROGRESS, Progress
from .targets import LogserverTarget, cpu_seconds, rss_mb
from .workloads import WorkloadResult

log = logging.getLogger(__name__)

#: MQTT peers this module knows, in run order.
MQTT_PEERS = ("mosquitto", "rumqttd", "amqtt")


class RumqttdProcess(ManagedProcess):
    """rumqttd as bundled by PyPI ``iotcore``, on 127.0.0.1 only, set up as iotcore does.

    iotcore's own launcher (``iotcore._serve``, what ``iotcore.Broker.start()`` runs)
    configures logging before it starts the broker: root at ``$IOTCORE_LOG_LEVEL``
    (default WARNING) and the ``rumqttd`` logger at CRITICAL, because rumqttd wraps its
    per-message routing in ``error_span!``s that reach Python logging as an ERROR record
    per packet. Without that set-up every packet is formatted and written to stderr,
    which made rumqttd 7-10x slower in CPU here. We run the same set-up; only the
    launcher's stdin watchdog (it exits when its parent's pipe closes) is left out,
    since this process is stopped by its pid.
    """

    name = "rumqttd"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir / "rumqttd.log")
        self.python = ensure_rumqttd()

    def command(self) -> list[str]:
        # `python -m iotcore` caps connections at 10,000, one short of the fan-out's
        # devices plus its publisher; the same broker class takes the limit as an argument.
        code = (
            "import logging, os, sys; "
            "sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
            "level = os.environ.get('IOTCORE_LOG_LEVEL', 'WARNING').upper(); "
            "logging.basicConfig(level=level, "
            "format='%(asctime)s %(levelname)s %(name)s: %(message)s'); "
            "logging.getLogger('rumqttd').setLevel("
            "logging.DEBUG if level == 'DEBUG' else logging.CRITICAL); "
            "from iotcore.iotcore import IotCoreBroker; "
            f"IotCoreBroker(listen={HOST!r}, port={self.port}, max_connections=20000)"
            ".run_forever()"
        )
        return [str(self.python), "-c", code]

    def env(self) -> dict[str, str]:
        return dict(os.environ)


class AmqttProcess(ManagedProcess):
    """amqtt (pure-Python asyncio broker), anonymous, no plugins beyond auth, 127.0.0.1."""

    name = "amqtt"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir / "amqtt.log")
        self.binary = ensure_amqtt()
        self.conf = workdir / "amqtt.yaml"
        workdir.mkdir(parents=True, exist_ok=True)
        self.conf.write_text(
            "listeners:\n  default:\n    type: tcp\n"
            f"    bind: {HOST}:{self.port}\n"
            "plugins:\n  amqtt.plugins.authentication.AnonymousAuthPlugin:\n"
            "    allow_anonymous: true\n"
        )

    def command(self) -> list[str]:
        return [str(self.binary), "-c", str(self.conf)]

    def env(self) -> dict[str, str]:
        return dict(os.environ)


def find_mosquitto() -> str | None:
    """Debian's mosquitto binary, if installed (``apt-get install mosquitto``)."""
    return shutil.which("mosquitto") or (
        "/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").exists() else None
    )


def make_peer(name: str, workdir: Path) -> ManagedProcess:
    """A stopped peer process; raises PeerUnavailable if it cannot be installed."""
    if name == "mosquitto":
        binary = find_mosquitto()
        if binary is None:
            raise PeerUnavailable("mosquitto not installed (apt-get install mosquitto)")
        return MosquittoProcess(workdir / "mosquitto", binary)
    if name == "rumqttd":
        return RumqttdProcess(workdir)
    if name == "amqtt":
        return AmqttProcess(workdir)
    raise PeerUnavailable(f"unknown MQTT peer {name!r}")


@dataclass
class MqttSettings:
    """The MQTT workloads' knobs, the same for every server."""

    devices: int = 50
    window: int = 20
    messages: int = 100_000
    size: int = 100
    time_cap: float = 20.0
    fanout: list[int] = field(default_factory=lambda: [10_000])
    notices: int = 10
    #: Seconds allowed to connect and subscribe the fan-out devices (pure-Python peers
    #: can take minutes for 10,000; past this the workload is reported as not measured).
    connect_cap: float = 120.0


async def publish_workload(port: int, devices: int, window: int, total: int, size: int,
                           cap_s: float, progress: Progress = NULL_PROGRESS,
                           label: str = "publish") -> dict[str, Any]:
    """QoS 1 PUBLISH from ``devices`` clients, ``window`` in flight each, counted at PUBACK."""
    clients = await connect_many(HOST, port, [f"bench-pub-{i}" for i in range(devices)])
    payload = b"x" * size
    per_device = total // devices
    acked = 0
    progress.start(label, per_device * devices, unit="messages")
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
            progress.update(acked)
        if pending:
            await asyncio.wait(pending, timeout=30)
            acked += sum(1 for f in pending if f.done())

    await asyncio.gather(*(run(c) for c in clients))
    elapsed = time.perf_counter() - t0
    await asyncio.gather(*(c.disconnect() for c in clients))
    progress.finish(f"{acked:,} PUBACKs, {acked / elapsed:,.0f}/s")
    return {"messages": acked, "seconds": round(elapsed, 3),
            "msgs_per_s": round(acked / elapsed, 1), "capped": acked < per_device * devices}


async def fanout_workload(port: int, subscribers: int, notices: int, size: int,
                          send: Callable[[bytes], Awaitable[None]],
                          progress: Progress = NULL_PROGRESS, label: str = "fan-out",
                          rss: Callable[[], float | None] = lambda: None,
                          connect_cap: float = 120.0) -> dict[str, Any]:
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
    progress.start(f"{label}: connecting", subscribers, unit="devices")
    t_connect = time.perf_counter()
    try:
        for i in range(0, subscribers, 200):
            ids = [f"bench-sub-{j}" for j in range(i, min(i + 200, subscribers))]
            batch = await connect_many(HOST, port, ids, on_message=on_message)
            clients += batch
            await asyncio.gather(*(c.subscribe("ota", qos=1) for c in batch))
            progress.update(len(clients))
            if time.perf_counter() - t_connect > connect_cap:
                raise TimeoutError(f"only {len(clients):,} of {subscribers:,} devices connected "
                                   f"and subscribed within {connect_cap:g}s")
        connect_s = time.perf_counter() - t_connect
        progress.finish(f"{subscribers:,} devices subscribed in {connect_s:.1f}s")
        await asyncio.sleep(0.5)
        memory = rss()
        latencies: list[float] = []
        first: list[float] = []
        progress.start(f"{label}: notices", notices, unit="notices")
        notices_end = time.perf_counter() + 2 * connect_cap / 3
        for n in range(-2, notices):  # two warm-up notices
            if latencies and time.perf_counter() > notices_end:
                log.info("%s: stopping after %d notices (time cap)", label, len(latencies))
                break
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
                progress.update(n + 1)
            await asyncio.sleep(0.05)
        progress.finish(f"{len(latencies)} notices to all {subscribers:,} devices")
    finally:
        for c in clients:
            c.abort()
    return {
        "subscribers": subscribers,
        "notices": len(latencies),
        "connect_s": round(connect_s, 2),
        "all_p50_ms": round(statistics.median(latencies) * 1000, 2) if latencies else None,
        "all_max_ms": round(max(latencies) * 1000, 2) if latencies else None,
        "first_p50_ms": round(statistics.median(first) * 1000, 2) if first else None,
        "deliveries_per_s": round(subscribers / statistics.median(latencies), 1) if latencies else None,
        "rss_mb": memory,
    }


def _result(target: str, workload: str, kind: str, size: int, data: dict[str, Any]) -> WorkloadResult:
    if kind == "publish":
        n, s = data["messages"], data["seconds"]
        r = WorkloadResult(
            workload=workload, kind="mqtt-publish", target=target, record_size=size,
            partitions=0, records_requested=n, records=n, bytes=n * size, seconds=s,
            records_per_s=data["msgs_per_s"], mb_per_s=round(n * size / s / 1e6, 2) if s else 0.0,
            capped=bool(data["capped"]))
        return r
    r = WorkloadResult(
        workload=workload, kind="mqtt-fanout", target=target, record_size=size, partitions=0,
        records_requested=data["subscribers"], records=data["subscribers"] * data["notices"],
        bytes=0, seconds=0.0, records_per_s=data.get("deliveries_per_s") or 0.0, mb_per_s=0.0,
        capped=data["notices"] == 0, primary="all_p50_ms", higher_is_better=False)
    r.metrics = {k: float(v) for k, v in data.items()
                 if k != "subscribers" and isinstance(v, int | float)}
    return r


async def _server_workloads(name: str, port: int, s: MqttSettings, progress: Progress,
                            send: Callable[[bytes], Awaitable[None]] | None,
                            rss: Callable[[], float | None],
                            pids: tuple[int, ...] = ()) -> list[WorkloadResult]:
    """Both workloads against one server; ``send`` None means publish notices over MQTT.

    ``pids``: the server's processes (bridge and logserver for ours), whose CPU time
    during the publish workload says whether the server or the load generator limited it.
    """
    out: list[WorkloadResult] = []

    def cpu() -> float:
        return sum(cpu_seconds(pid) or 0.0 for pid in pids)

    cpu_before, t0 = cpu(), time.perf_counter()
    data = await publish_workload(port, s.devices, s.window, s.messages, s.size, s.time_cap,
                                  progress, f"{name} mqtt-publish-qos1")
    result = _result(name, "mqtt-publish-qos1", "publish", s.size, data)
    if pids:
        used = cpu() - cpu_before
        result.metrics = {"server_cpu_s": round(used, 2),
                          "server_cpu_share": round(used / (time.perf_counter() - t0), 3)}
    out.append(result)
    publisher: MqttClient | None = None
    if send is None:
        publisher = MqttClient("bench-ota-pub")
        await publisher.connect(HOST, port)

        async def mqtt_send(body: bytes) -> None:
            assert publisher is not None
            publisher.publish("ota", body, 1)

        send = mqtt_send
    try:
        for n in s.fanout:
            data = await fanout_workload(port, n, s.notices, s.size, send, progress,
                                         f"{name} mqtt-fanout-{n}", rss, s.connect_cap)
            out.append(_result(name, f"mqtt-fanout-{n}", "fanout", s.size, data))
    finally:
        if publisher is not None:
            await publisher.disconnect()
    return out


def _run(coro: Awaitable[Any]) -> Any:
    try:
        import uvloop

        return uvloop.run(coro)  # type: ignore[arg-type]
    except ImportError:
        return asyncio.run(coro)  # type: ignore[arg-type]


@dataclass
class MqttRun:
    """What the MQTT part of a run measured."""

    results: list[WorkloadResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    targets: list[dict[str, object]] = field(default_factory=list)


def run_suite(workdir: Path, settings: MqttSettings, peers: list[str],
              progress: Progress = NULL_PROGRESS, bridge: bool = True,
              server_args: list[str] | None = None) -> MqttRun:
    """The bridge (with logserver behind it), then each peer, one server at a time.

    A server that fails to install or start becomes a note; the others still run.
    """
    run = MqttRun()
    if bridge:
        _run_bridge(workdir, settings, progress, run, server_args or [])
        progress.advance()
    for name in peers:
        try:
            proc = make_peer(name, workdir / f"mqtt-{name}")
        except PeerUnavailable as exc:
            run.notes.append(f"{name}: not measured: {exc}")
            run.targets.append({"name": name, "role": "peer", "error": str(exc)})
            progress.advance()
            continue
        try:
            log.info("starting %s on %s:%d", name, HOST, proc.port)
            proc.start()
            assert proc.proc is not None
            pid = proc.proc.pid
            run.results += _run(_server_workloads(name, proc.port, settings, progress, None,
                                                  lambda pid=pid: rss_mb(pid), (pid,)))
        except Exception as exc:  # one broken peer never costs the others' figures
            progress.clear()
            log.warning("%s: %s", name, exc)
            run.notes.append(f"{name}: failed: {exc}")
        finally:
            proc.stop()
            run.targets.append({"name": name, "role": "peer", "command": proc.command(),
                                "protocol": "mqtt"})
            progress.advance()
    return run


def _run_bridge(workdir: Path, settings: MqttSettings, progress: Progress, run: MqttRun,
                server_args: list[str]) -> None:
    work = workdir / "mqtt-bridge"
    work.mkdir(parents=True, exist_ok=True)
    logserver = LogserverTarget(work, ["--num.partitions", "3", *server_args])
    bridge: BridgeProcess | None = None
    try:
        bootstrap = logserver.start()
        bridge = BridgeProcess(bootstrap, work / "bridge.log", "--log-level", "WARNING",
                               "--max-connection-rate", "100000")
        log.info("starting mqtt-bridge on %s:%d", HOST, bridge.port)
        bridge.start()
        assert bridge.proc is not None
        pid = bridge.proc.pid

        async def workloads() -> list[WorkloadResult]:
            client = KafkaClient(bootstrap)
            producer = Producer(client, linger_ms=0)
            producer.start()

            async def kafka_send(body: bytes) -> None:
                await producer.send("ota", None, body)

            try:
                ls_pid = logserver.pid()
                return await _server_workloads("bridge", bridge.port, settings, progress,
                                               kafka_send, lambda: rss_mb(pid),
                                               (pid,) if ls_pid is None else (pid, ls_pid))
            finally:
                await producer.close()
                await client.close()

        results = _run(workloads())
        for r in results:
            if r.kind == "mqtt-fanout":
                ls_rss = logserver.rss_mb()
                if ls_rss is not None:
                    r.metrics["logserver_rss_mb"] = ls_rss
        run.results += results
    except Exception as exc:
        progress.clear()
        log.warning("bridge: %s", exc)
        run.notes.append(f"bridge: failed: {exc}")
    finally:
        if bridge is not None:
            bridge.stop()
        with contextlib.suppress(Exception):
            logserver.stop()
        run.targets.append({"name": "bridge", "role": "ours", "protocol": "mqtt",
                            "command": bridge.command() if bridge else None,
                            "logserver": logserver.describe()})


def report(results: list[WorkloadResult], settings: MqttSettings) -> str:
    """The bridge's figures next to each peer's, with ratios (>1 = bridge better)."""
    servers = list(dict.fromkeys(r.target for r in results))
    by = {(r.workload, r.target): r for r in results}
    lines = [f"MQTT servers, same load generator (payload {settings.size} B)", ""]
    head = f"{'workload':36}" + "".join(f"{s:>12}" for s in servers)
    head += "".join(f"{'bridge/' + s[:5]:>14}" for s in servers if s != "bridge")
    lines.append(head)
    rows: list[tuple[str, str, str]] = [("mqtt-publish-qos1", "msgs_per_s", "QoS1 publish msgs/s")]
    for n in settings.fanout:
        w = f"mqtt-fanout-{n}"
        rows += [(w, "all_p50_ms", f"fan-out {n}: to all p50 ms"),
                 (w, "all_max_ms", f"fan-out {n}: to all max ms"),
                 (w, "first_p50_ms", f"fan-out {n}: to first p50 ms"),
                 (w, "rss_mb", f"fan-out {n}: server RSS MB")]
    for workload, metric, label in rows:
        vals: dict[str, float | None] = {}
        for s in servers:
            r = by.get((workload, s))
            vals[s] = None if r is None else (r.records_per_s if metric == "msgs_per_s" else r.metrics.get(metric))
        line = f"{label:36}" + "".join(f"{v:>12,.1f}" if v is not None else f"{'-':>12}" for v in vals.values())
        ours = vals.get("bridge")
        for s in servers:
            if s == "bridge":
                continue
            v = vals[s]
            if ours and v:
                ratio = ours / v if metric == "msgs_per_s" else v / ours
                line += f"{ratio:>14.2f}"
            else:
                line += f"{'-':>14}"
        lines.append(line)
    lines += ["", "Ratios: >1 means the bridge is better (more msgs/s, less latency or memory).",
              "The bridge's publish path includes the log write (acks=all) before each PUBACK;",
              "its fan-out path includes the Kafka produce, the log append and the fetch."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """The MQTT workloads on their own (``python -m benchmarks`` runs them too)."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.mqtt_bench",
                                description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--devices", type=int, default=50, help="publishing devices (default 50)")
    p.add_argument("--window", type=int, default=20, help="QoS 1 PUBLISHes in flight per device (default 20)")
    p.add_argument("--messages", type=int, default=100_000, help="messages in the publish workload (default 100,000)")
    p.add_argument("--size", type=int, default=100, help="payload bytes (default 100)")
    p.add_argument("--time-cap", type=float, default=20.0, help="seconds cap per publish run (default 20)")
    p.add_argument("--fanout", type=int, nargs="+", default=[10_000], help="subscriber counts (default 10000)")
    p.add_argument("--notices", type=int, default=10, help="notices per fan-out run (default 10)")
    p.add_argument("--peers", default=",".join(MQTT_PEERS),
                   help=f"peer MQTT servers (default {','.join(MQTT_PEERS)}; '' for none)")
    p.add_argument("--quick", action="store_true", help="smoke run: 10,000 messages, fan-out to 1,000 devices")
    p.add_argument("--no-mosquitto", action="store_true", help="(compatibility) same as --peers ''")
    p.add_argument("--output", type=Path, default=Path(__file__).resolve().parent / "results" / "mqtt.json")
    args = p.parse_args(argv)
    if args.quick:
        args.messages, args.fanout, args.notices = 10_000, [1000], 5
    peers = [] if args.no_mosquitto else [x.strip() for x in args.peers.split(",") if x.strip()]
    unknown = [x for x in peers if x not in MQTT_PEERS]
    if unknown:
        p.error(f"unknown peer(s) {unknown}; known: {', '.join(MQTT_PEERS)}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    settings = MqttSettings(devices=args.devices, window=args.window, messages=args.messages,
                            size=args.size, time_cap=args.time_cap, fanout=args.fanout,
                            notices=args.notices)
    with tempfile.TemporaryDirectory(prefix="mqtt-bench-") as tmp:
        run = run_suite(Path(tmp), settings, peers, Progress())
    sys.stdout.write(report(run.results, settings) + "\n")
    for note in run.notes:
        sys.stdout.write(f"  - {note}\n")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({
        "settings": {k: v for k, v in vars(args).items() if k != "output"},
        "results": [r.to_json() for r in run.results], "notes": run.notes,
        "targets": run.targets}, indent=2, default=str))
    return 0 if run.results else 1


if __name__ == "__main__":
    raise SystemExit(main())
