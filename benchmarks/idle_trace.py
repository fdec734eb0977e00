"""``python -m benchmarks.idle_trace``: where an idle MQTT device's bytes go (issue 27).

Starts a logserver and an mqtt-bridge whose Python allocations are traced (tracemalloc,
8 frames), connects ``--devices`` idle devices (CONNECT, one PINGREQ: the load generator
of ``benchmarks.idle_memory``), and compares a snapshot taken before them with one taken
after: the traced bytes per device and the source lines that hold them, largest first.
The bridge's RSS is printed too; tracemalloc's own bookkeeping inflates it, so RSS
figures come from ``benchmarks.idle_memory``. Every process is stopped by its pid.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from commonlib.childproc import HOST, free_port

from .idle_memory import connect_idle, logserver_target, raise_open_files, rss_kib

#: runs the bridge with tracemalloc on; SIGUSR2 writes a snapshot to $SNAPSHOT.<n>
_TRACED_BRIDGE = """
import gc, os, signal, sys, tracemalloc
tracemalloc.start(8)
taken = [0]
def dump(*_):
    gc.collect()
    path = f"{os.environ['SNAPSHOT']}.{taken[0]}"
    taken[0] += 1
    tracemalloc.take_snapshot().dump(path + ".tmp")
    os.replace(path + ".tmp", path)
signal.signal(signal.SIGUSR2, dump)
from mqtt_bridge.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _snapshot(proc: subprocess.Popen[bytes], path: Path, timeout: float = 300) -> tracemalloc.Snapshot:
    proc.send_signal(signal.SIGUSR2)
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"no snapshot from the bridge (exit code {proc.poll()})")
        time.sleep(0.2)
    return tracemalloc.Snapshot.load(str(path))


def _wait_listening(log_path: Path, proc: subprocess.Popen[bytes], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while "mqtt-bridge listening" not in log_path.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the bridge did not start; see {log_path}")
        time.sleep(0.2)


def trace(devices: int, work: Path, top: int) -> str:
    """The report: traced bytes per device and the lines that hold them."""
    lines: list[str] = []
    with logserver_target(work) as logserver:
        port = free_port()
        log_path = work / "bridge.log"
        # a traced bridge is slow: a CONNECT may wait long for its CONNACK on a busy machine
        config = work / "bridge.toml"
        config.write_text("connect_timeout_s = 300\n")
        env = {**os.environ, "SNAPSHOT": str(work / "snapshot"),
               "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
        with open(log_path, "wb") as log_file:
            proc = subprocess.Popen(
                [sys.executable, "-c", _TRACED_BRIDGE, "-c", str(config), "--listen", f"{HOST}:{port}",
                 "--bootstrap-servers", str(logserver.bootstrap), "--stats-interval-s", "0",
                 "--max-connection-rate", "100000"],
                env=env, stdout=log_file, stderr=subprocess.STDOUT)
        try:
            _wait_listening(log_path, proc)
            time.sleep(1.0)
            rss0, before = rss_kib(proc.pid), _snapshot(proc, work / "snapshot.0")

            async def connect_and_snapshot() -> tuple[int, tracemalloc.Snapshot]:
                clients = await connect_idle(port, devices, parallel=20)
                try:
                    await asyncio.sleep(1.0)
                    return rss_kib(proc.pid), _snapshot(proc, work / "snapshot.1")
                finally:
                    for c in clients:
                        if c.transport is not None:
                            c.transport.close()

            rss1, after = asyncio.run(connect_and_snapshot())
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    size0 = sum(t.size for t in before.traces)
    size1 = sum(t.size for t in after.traces)
    lines.append(f"traced: {size0 / 2**20:.1f} MiB idle, {size1 / 2**20:.1f} MiB with {devices} "
                 f"devices: {(size1 - size0) / devices:.0f} B per device")
    lines.append(f"RSS (traced process): {rss0 / 1024:.1f} MiB idle, {rss1 / 1024:.1f} MiB with them")
    lines.append("growth by line (B per device, allocations per device, line):")
    for st in after.compare_to(before, "lineno")[:top]:
        frame = st.traceback[0]
        lines.append(f"  {st.size_diff / devices:7.1f} {st.count_diff / devices:5.2f}  "
                     f"{frame.filename}:{frame.lineno}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.idle_trace",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", type=int, default=2000)
    parser.add_argument("--top", type=int, default=25, help="lines shown (default 25)")
    args = parser.parse_args(argv)
    raise_open_files()
    with tempfile.TemporaryDirectory(prefix="idle-trace-") as tmp:
        print(trace(args.devices, Path(tmp), args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
