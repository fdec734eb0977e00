"""``python -m benchmarks.mqtt_bench``: mqtt-bridge next to peer MQTT servers, same load.

Two workloads, each run against the bridge (in front of logserver, started here) and
against each peer (mosquitto from Debian, rumqttd from PyPI ``iotcore``, amqtt from
PyPI), one server at a time, printed side by side as ratios:

- ``mqtt-publish-qos1``: QoS 1 publish throughput end to end. D devices, each keeping W
  PUBLISHes in flight; PUBACKs arriving in the measured window (after a warm-up) count
  (for the bridge: after the log acknowledged the write with acks=all; the peers
  persist nothing).
- ``mqtt-fanout-N``: N devices subscribed (QoS 1) to ``ota``; two warm-up notices, then
  notices one at a time for at least the measured window and at least K notices; a
  notice's latency runs from its publish until the last device has it. A notice that
  does not reach every device within 30 s is a failure: it counts in
  ``notices_failed`` and enters the figures as 30 s, never skipped. The bridge's
  notices are produced to the Kafka topic ``ota`` (the backend's path: log write, then
  fetch and fan-out); the peers' are MQTT PUBLISHes to ``ota``. The server's resident
  memory with all N devices connected is recorded too.

Each workload runs ``repeats`` times on every server, back to back in alternating
order, each run on a freshly started server. The load generator is
``tests/helpers/mqtt_client.py`` (asyncio, one process) for every server. Every process started
here is stopped by pid at the end, also on failure.
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

from commonlib.childproc import HOST, ListeningChild, python_path_env
from commonlib.kafkaclient import KafkaClient
from mqtt_bridge.compiled import PURE_ENV
from mqtt_bridge.kafka_producer import Producer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from helpers.mqtt_client import MqttClient  # noqa: E402  (tests/ on the path first)
from helpers.mqtt_procs import BridgeProcess, MosquittoProcess  # noqa: E402

from .mqtt_load import Counter, Subscriber, connect_publishers, connect_subscribers
from .mqtt_multi import start_bridges
from .mypyc_build import MypycUnavailable, build_compiled_bridge, compiled_env
from .peers import PeerUnavailable, ensure_amqtt, ensure_rumqttd
from .progress import NULL_PROGRESS, Progress
from .targets import LogserverTarget, cpu_seconds, rss_mb
from .window import Window
from .workloads import WorkloadResult

log = logging.getLogger(__name__)

#: MQTT peers this module knows, in run order.
MQTT_PEERS = ("mosquitto", "mosquitto-persist", "rumqttd", "amqtt")


class RumqttdProcess(ListeningChild):
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


class AmqttProcess(ListeningChild):
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


def make_peer(name: str, workdir: Path) -> ListeningChild:
    """A stopped peer process; raises PeerUnavailable if it cannot be installed."""
    if name == "mosquitto":
        binary = find_mosquitto()
        if binary is None:
            raise PeerUnavailable("mosquitto not installed (apt-get install mosquitto)")
        return MosquittoProcess(workdir / "mosquitto", binary)
    if name == "mosquitto-persist":
        binary = find_mosquitto()
        if binary is None:
            raise PeerUnavailable("mosquitto not installed (apt-get install mosquitto)")
        return MosquittoProcess(workdir / "mosquitto-persist", binary, persistence=True)
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
    size: int = 100
    warmup_s: float = 1.0
    measure_s: float = 5.0
    qos: list[int] = field(default_factory=lambda: [1, 0])  # publish workloads
    fanout: list[int] = field(default_factory=lambda: [10_000])
    notices: int = 10  # at least this many measured notices (and at least measure_s)
    notice_timeout_s: float = 30.0  # a notice not everywhere by then is a failure
    #: Seconds allowed to connect and subscribe the fan-out devices (pure-Python peers
    #: can take minutes for 10,000; past this the run is reported as failed).
    connect_cap: float = 120.0
    #: further bridge set-ups run as servers of their own: N processes behind one port
    #: (SO_REUSEPORT), named ``bridge-xN`` and compared with the single-process bridge
    bridge_processes: list[int] = field(default_factory=list)
    #: a copy of mqtt_bridge with its hot modules compiled by mypyc (benchmarks/mypyc_build):
    #: when set, the bridge also runs from it, as server ``bridge-mypyc``, and ``bridge``
    #: runs from the sources (MQTT_BRIDGE_PURE_PYTHON=1, whatever the install compiled)
    mypyc_tree: Path | None = None


async def publish_workload(port: int, devices: int, window: int, size: int,
                           warmup_s: float, measure_s: float,
                           measured: Window | None = None,
                           progress: Progress = NULL_PROGRESS,
                           label: str = "publish", qos: int = 1) -> dict[str, Any]:
    """PUBLISH from ``devices`` clients without pause, counted as ``mqtt_load`` describes.

    QoS 1: ``window`` in flight per device, a PUBACK counts; QoS 0: ``window`` bursts of
    20 in flight, each closed by a PINGREQ whose PINGRESP counts the burst. What is
    acknowledged in the measured window (after the warm-up) counts.
    """
    counter = Counter()
    pubs = await connect_publishers(HOST, port, devices, qos, window, size, counter)
    progress.start(label, 0, unit="messages")
    for p in pubs:
        p.start()
    try:
        await asyncio.sleep(warmup_s)
        if measured is not None:
            measured.begin()
        t0, first = time.perf_counter(), counter.acked
        deadline = t0 + measure_s
        while (left := deadline - time.perf_counter()) > 0:
            await asyncio.sleep(min(0.5, left))
            progress.update(counter.acked - first)
        counted, elapsed = counter.acked - first, time.perf_counter() - t0
        if measured is not None:
            measured.end()
    finally:
        counter.running = False
    # what was sent and never acknowledged once the server had 30 s more
    drain = time.perf_counter() + 30
    while counter.sent > counter.acked and time.perf_counter() < drain:
        await asyncio.sleep(0.05)
    unacked = counter.sent - counter.acked
    for p in pubs:
        if p.transport is not None:
            p.transport.write(b"\xe0\x00")  # DISCONNECT
            p.transport.close()
    await asyncio.wait([asyncio.ensure_future(p.closed) for p in pubs], timeout=5)
    progress.finish(f"{counted:,} acknowledged in the window, {counted / elapsed:,.0f}/s")
    return {"messages": counted, "seconds": round(elapsed, 3),
            "msgs_per_s": round(counted / elapsed, 1), "unacked": unacked}


async def fanout_workload(port: int, subscribers: int, notices: int, size: int,
                          send: Callable[[bytes], Awaitable[None]],
                          progress: Progress = NULL_PROGRESS, label: str = "fan-out",
                          rss: Callable[[], float | None] = lambda: None,
                          connect_cap: float = 120.0, measure_s: float = 5.0,
                          timeout_s: float = 30.0,
                          measured: Window | None = None) -> dict[str, Any]:
    """``send(payload)`` publishes one notice by the server's own path."""
    got: dict[int, list[float]] = {}
    waiters: dict[int, asyncio.Event] = {}

    def on_message(payload: bytes, now: float) -> None:
        if len(payload) >= 4 and payload[:2] == b"N:":
            n = int(payload[2:].split(b":")[0])
            lst = got.setdefault(n, [])
            lst.append(now)
            if len(lst) == subscribers and n in waiters:
                waiters[n].set()

    clients: list[Subscriber] = []
    progress.start(f"{label}: connecting", subscribers, unit="devices")
    t_connect = time.perf_counter()
    latencies: list[float] = []
    first: list[float] = []
    failed = missing = 0
    try:
        for i in range(0, subscribers, 200):
            ids = [f"bench-sub-{j}" for j in range(i, min(i + 200, subscribers))]
            batch = await connect_subscribers(HOST, port, ids, "ota", 1, on_message)
            clients += batch
            progress.update(len(clients))
            if time.perf_counter() - t_connect > connect_cap:
                raise TimeoutError(f"only {len(clients):,} of {subscribers:,} devices connected "
                                   f"and subscribed within {connect_cap:g}s")
        connect_s = time.perf_counter() - t_connect
        progress.finish(f"{subscribers:,} devices subscribed in {connect_s:.1f}s")
        await asyncio.sleep(0.5)
        memory = rss()
        progress.start(f"{label}: notices", notices, unit="notices")
        started: float | None = None
        n = -2  # two warm-up notices
        while True:
            if n == 0:
                if measured is not None:
                    measured.begin()
                started = time.perf_counter()
            elif started is not None and len(latencies) >= notices and (
                    time.perf_counter() - started >= measure_s):
                break
            waiters[n] = asyncio.Event()
            body = f"N:{n}:".encode().ljust(size, b"f")
            t0 = time.monotonic()
            await send(body)
            try:
                await asyncio.wait_for(waiters[n].wait(), timeout_s)
                arrived = got[n]
                whole = max(arrived) - t0
            except TimeoutError:
                arrived = got.get(n, [])
                log.warning("%s: notice %d reached %d of %d devices within %gs", label, n,
                            len(arrived), subscribers, timeout_s)
                if n >= 0:
                    failed += 1
                    missing += subscribers - len(arrived)
                whole = timeout_s  # a lower bound: counted, never skipped
            if n >= 0:
                latencies.append(whole)
                first.append(min(arrived) - t0 if arrived else timeout_s)
                progress.update(len(latencies))
            n += 1
            await asyncio.sleep(0.05)
        if measured is not None:
            measured.end()
        progress.finish(f"{len(latencies)} notices, {failed} never reached every device")
    finally:
        for c in clients:
            if c.transport is not None:
                c.transport.abort()
    return {
        "subscribers": subscribers,
        "notices": len(latencies),
        "notices_failed": failed,
        "deliveries_missing": missing,
        "connect_s": round(connect_s, 2),
        "all_p50_ms": round(statistics.median(latencies) * 1000, 2),
        "all_max_ms": round(max(latencies) * 1000, 2),
        "first_p50_ms": round(statistics.median(first) * 1000, 2),
        "deliveries_per_s": round(subscribers / statistics.median(latencies), 1),
        "rss_mb": memory,
    }


def _result(target: str, workload: str, kind: str, size: int, data: dict[str, Any]) -> WorkloadResult:
    if kind == "publish":
        n, s = data["messages"], data["seconds"]
        r = WorkloadResult(
            workload=workload, kind="mqtt-publish", target=target, record_size=size,
            partitions=0, records_requested=n, records=n, bytes=n * size, seconds=s,
            records_per_s=data["msgs_per_s"], mb_per_s=round(n * size / s / 1e6, 2) if s else 0.0,
            capped=False, errors=int(data["unacked"]),
            note=f"{data['unacked']} PUBLISHes never acknowledged" if data["unacked"] else None)
        return r
    r = WorkloadResult(
        workload=workload, kind="mqtt-fanout", target=target, record_size=size, partitions=0,
        records_requested=data["subscribers"], records=data["subscribers"] * data["notices"],
        bytes=0, seconds=0.0, records_per_s=data.get("deliveries_per_s") or 0.0, mb_per_s=0.0,
        capped=data["notices_failed"] > 0, errors=int(data["notices_failed"]),
        note=(f"{data['notices_failed']} of {data['notices']} notices never reached every "
              f"device ({data['deliveries_missing']:,} deliveries missing)"
              if data["notices_failed"] else None),
        primary="all_p50_ms", higher_is_better=False)
    r.metrics = {k: float(v) for k, v in data.items()
                 if k != "subscribers" and isinstance(v, int | float)}
    return r


async def _one_workload(name: str, workload: str, port: int, s: MqttSettings,
                        progress: Progress, send: Callable[[bytes], Awaitable[None]] | None,
                        rss: Callable[[], float | None], pids: tuple[int, ...]
                        ) -> WorkloadResult:
    """One run of ``workload`` against one server; ``send`` None: notices over MQTT.

    ``pids``: the server's processes (bridge and logserver for ours), whose CPU over the
    measured window says whether the server or the load generator limited it.
    """
    def cpu() -> float | None:
        return sum(cpu_seconds(pid) or 0.0 for pid in pids) if pids else None

    window = Window(cpu)
    if workload.startswith("mqtt-publish-qos"):
        data = await publish_workload(port, s.devices, s.window, s.size, s.warmup_s,
                                      s.measure_s, window, progress, f"{name} {workload}",
                                      qos=int(workload[-1]))
        result = _result(name, workload, "publish", s.size, data)
    else:
        n = int(workload.rsplit("-", 1)[1])
        publisher: MqttClient | None = None
        if send is None:
            publisher = MqttClient("bench-ota-pub")
            await publisher.connect(HOST, port)

            async def mqtt_send(body: bytes) -> None:
                assert publisher is not None
                publisher.publish("ota", body, 1)

            send = mqtt_send
        try:
            data = await fanout_workload(port, n, s.notices, s.size, send, progress,
                                         f"{name} {workload}", rss, s.connect_cap,
                                         s.measure_s, s.notice_timeout_s, window)
        finally:
            if publisher is not None:
                await publisher.disconnect()
        result = _result(name, workload, "fanout", s.size, data)
    result.metrics.update(window.metrics())
    return result


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
    ours_failed: bool = False


def workload_names(settings: MqttSettings) -> list[str]:
    return [*(f"mqtt-publish-qos{q}" for q in settings.qos),
            *(f"mqtt-fanout-{n}" for n in settings.fanout)]


def run_suite(workdir: Path, settings: MqttSettings, peers: list[str],
              progress: Progress = NULL_PROGRESS, bridge: bool = True,
              server_args: list[str] | None = None, repeats: int = 3) -> MqttRun:
    """Each workload ``repeats`` times on the bridge and each peer, alternating the order.

    A server that fails to install becomes a note; a failed run becomes a note; the
    others still run.
    """
    run = MqttRun()
    servers: list[str] = ["bridge"] if bridge else []
    if bridge:
        servers += [f"bridge-x{n}" for n in settings.bridge_processes if n > 1]
        if settings.mypyc_tree is not None:
            servers.append("bridge-mypyc")
    for name in peers:
        try:
            make_peer(name, workdir / f"install-{name}")  # installs on first use
        except PeerUnavailable as exc:
            run.notes.append(f"{name}: not measured: {exc}")
            run.targets.append({"name": name, "role": "peer", "error": str(exc)})
            continue
        servers.append(name)
    described: set[str] = set()
    for workload in workload_names(settings):
        for repeat in range(repeats):
            order = servers if repeat % 2 == 0 else servers[::-1]
            for position, name in enumerate(order, 1):
                rundir = workdir / f"mqtt-{name}-{workload}-{repeat + 1}"
                try:
                    if name.startswith("bridge"):
                        result = _run_bridge(rundir, workload, settings, progress, run,
                                             server_args or [], described, name)
                    else:
                        result = _run_peer(name, rundir, workload, settings, progress, run,
                                           described)
                    result.run, result.position = repeat + 1, position
                    run.results.append(result)
                except Exception as exc:  # one broken run never costs the others' figures
                    progress.clear()
                    note = f"{name} {workload} run {repeat + 1}: failed: {exc}"
                    log.warning("%s", note)
                    run.notes.append(note)
                    run.ours_failed |= name == "bridge"
                finally:
                    progress.advance()
                    shutil.rmtree(rundir, ignore_errors=True)
    return run


def _log_note(name: str, workload: str, path: Path, run: MqttRun) -> None:
    """A note when a server wrote more than 1 MB of log output in one run."""
    try:
        size = path.stat().st_size
    except OSError:
        return
    if size > 1 << 20:
        run.notes.append(f"{name} {workload} ({path.parent.name}): the server wrote "
                         f"{size / 1e6:,.1f} MB of log "
                         "output; per-message logging slows a server, check how it is started")


def _run_peer(name: str, rundir: Path, workload: str, settings: MqttSettings,
              progress: Progress, run: MqttRun, described: set[str]) -> WorkloadResult:
    proc = make_peer(name, rundir)
    try:
        log.info("starting %s on %s:%d", name, HOST, proc.port)
        proc.start()
        assert proc.proc is not None
        pid = proc.proc.pid
        return _run(_one_workload(name, workload, proc.port, settings, progress, None,
                                  lambda: rss_mb(pid), (pid,)))
    finally:
        proc.stop()
        _log_note(name, workload, proc.log_path, run)
        if name not in described:
            described.add(name)
            run.targets.append({"name": name, "role": "peer", "command": proc.command(),
                                "protocol": "mqtt"})


def _run_bridge(work: Path, workload: str, settings: MqttSettings, progress: Progress,
                run: MqttRun, server_args: list[str], described: set[str],
                name: str = "bridge") -> WorkloadResult:
    work.mkdir(parents=True, exist_ok=True)
    logserver = LogserverTarget(work, ["--num.partitions", "3", *server_args])
    bridges: list[BridgeProcess] = []
    processes = int(name.rpartition("-x")[2]) if "-x" in name else 1
    try:
        bootstrap = logserver.start()
        log.info("starting %d mqtt-bridge process(es)", processes)
        tree = settings.mypyc_tree if name == "bridge-mypyc" else None
        env = compiled_env(tree) if tree else None
        if settings.mypyc_tree is not None and name == "bridge":
            env = python_path_env({PURE_ENV: "1"})  # against the compiled copy: pure Python
        bridges = start_bridges(processes, bootstrap, work, "--log-level", "WARNING",
                                "--max-connection-rate", "100000", env=env, cwd=tree)
        if tree is not None:
            for b in bridges:
                assert b.proc is not None
                if str(tree) not in Path(f"/proc/{b.proc.pid}/maps").read_text():
                    raise RuntimeError(f"{name}: the bridge did not load the compiled modules")
        bridge = bridges[0]
        pids = tuple(b.proc.pid for b in bridges if b.proc is not None)

        def bridges_rss() -> float | None:
            sizes = [rss_mb(p) for p in pids]
            return None if None in sizes else sum(x for x in sizes if x is not None)

        async def one() -> WorkloadResult:
            client = KafkaClient(bootstrap, client_id="mqtt-bridge")
            producer = Producer(client, linger_ms=0)
            producer.start()

            async def kafka_send(body: bytes) -> None:
                await producer.send("ota", None, body)

            try:
                ls_pid = logserver.pid()
                return await _one_workload(name, workload, bridge.port, settings, progress,
                                           kafka_send, bridges_rss,
                                           pids if ls_pid is None else (*pids, ls_pid))
            finally:
                await producer.close()
                await client.close()

        result: WorkloadResult = _run(one())
        if result.kind == "mqtt-fanout":
            ls_rss = logserver.rss_mb()
            if ls_rss is not None:
                result.metrics["logserver_rss_mb"] = ls_rss
        return result
    finally:
        for b in bridges:
            b.stop()
            _log_note(name, workload, b.log_path, run)
        with contextlib.suppress(Exception):
            logserver.stop()
        if name not in described:
            described.add(name)
            run.targets.append({"name": name, "role": "ours" if name == "bridge" else "peer",
                                "protocol": "mqtt", "processes": processes,
                                "command": bridges[0].command() if bridges else None,
                                "logserver": logserver.describe()})


def report(results: list[WorkloadResult]) -> str:
    """The bridge's figures next to each peer's: median [min-max] and the comparison."""
    # Imported here: report imports the runner, which imports this module.
    from .report import detail_text, figure_text
    from .summary import ours_of, summarize, versus

    roles = {r.target: ("ours" if r.target == "bridge" else "peer") for r in results}
    summaries = summarize(results, roles)
    lines = ["MQTT servers, same load generator: median [min-max] of the runs; 'vs bridge' is "
             "the ratio of medians (>1: the bridge better), 'even' when the ranges overlap", ""]
    for sm in summaries:
        f = sm.figures()
        vs = versus(sm, ours_of(summaries, sm.workload))
        lines.append(f"  {sm.workload:<20}{sm.target:<11}{figure_text(sm.kind, sm.primary, f):>40}"
                     f"  {vs.text() if vs else '':<18}{detail_text(sm.kind, sm.primary, f)}")
    lines += ["", "The bridge's publish path includes the log write (acks=all) before each "
              "PUBACK; its fan-out path includes the Kafka produce, the log append and the fetch."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """The MQTT workloads on their own (``python -m benchmarks`` runs them too)."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.mqtt_bench",
                                description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--devices", type=int, default=50, help="publishing devices (default 50)")
    p.add_argument("--window", type=int, default=20, help="QoS 1 PUBLISHes in flight per device (default 20)")
    p.add_argument("--size", type=int, default=100, help="payload bytes (default 100)")
    p.add_argument("--seconds", type=float, default=5.0, help="measured window per run (default 5)")
    p.add_argument("--warmup", type=float, default=1.0, help="warm-up per run (default 1)")
    p.add_argument("--repeats", type=int, default=3, help="runs per workload and server (default 3)")
    p.add_argument("--qos", type=int, nargs="*", choices=(0, 1), default=[1, 0],
                   help="publish workloads by QoS (default 1 0; none: no publish workload)")
    p.add_argument("--fanout", type=int, nargs="*", default=[10_000],
                   help="subscriber counts (default 10000; none: publish only)")
    p.add_argument("--notices", type=int, default=10, help="at least this many notices per fan-out run (default 10)")
    p.add_argument("--peers", default=",".join(MQTT_PEERS),
                   help=f"peer MQTT servers (default {','.join(MQTT_PEERS)}; '' for none)")
    p.add_argument("--bridge-processes", type=int, nargs="*", default=[],
                   help="also run the bridge as N processes behind one port (SO_REUSEPORT), "
                   "as server bridge-xN, e.g. --bridge-processes 2")
    p.add_argument("--mypyc", action="store_true",
                   help="also run the bridge with its codec and routing modules compiled by "
                   "mypyc (benchmarks/mypyc_build.py), as server bridge-mypyc")
    p.add_argument("--output", type=Path, default=Path(__file__).resolve().parent / "results" / "mqtt.json")
    args = p.parse_args(argv)
    peers = [x.strip() for x in args.peers.split(",") if x.strip()]
    unknown = [x for x in peers if x not in MQTT_PEERS]
    if unknown:
        p.error(f"unknown peer(s) {unknown}; known: {', '.join(MQTT_PEERS)}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    settings = MqttSettings(devices=args.devices, window=args.window, size=args.size,
                            warmup_s=args.warmup, measure_s=args.seconds, fanout=args.fanout,
                            qos=args.qos,
                            notices=args.notices, bridge_processes=args.bridge_processes)
    with tempfile.TemporaryDirectory(prefix="mqtt-bench-") as tmp:
        if args.mypyc:
            try:
                settings.mypyc_tree = build_compiled_bridge(Path(tmp) / "mypyc")
            except MypycUnavailable as exc:
                p.exit(2, f"mqtt_bench: {exc}\n")
        run = run_suite(Path(tmp), settings, peers, Progress(), repeats=args.repeats)
    sys.stdout.write(report(run.results) + "\n")
    for note in run.notes:
        sys.stdout.write(f"  - {note}\n")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({
        "settings": {k: v for k, v in vars(args).items() if k != "output"},
        "results": [r.to_json() for r in run.results], "notes": run.notes,
        "targets": run.targets}, indent=2, default=str))
    return 0 if run.results and not run.ours_failed else 1


if __name__ == "__main__":
    raise SystemExit(main())
