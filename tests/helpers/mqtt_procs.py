"""mqtt-bridge and mosquitto as child processes on 127.0.0.1, for tests and benchmarks.

Managed by :mod:`commonlib.childproc`: each is stopped by its pid (SIGTERM, then SIGKILL),
by an ``atexit`` hook, and by the kernel if the parent dies (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from commonlib.childproc import HOST, ListeningChild
from logserver.bridge_process import bridge_command

__all__ = ["HOST", "BridgeProcess", "MosquittoProcess", "SharedPortBridge", "mosquitto_pub",
           "stats_lines", "wait_for_counters"]


class BridgeProcess(ListeningChild):
    """``python -m mqtt_bridge`` against ``bootstrap``, extra flags as given."""

    name = "mqtt-bridge"

    def __init__(self, bootstrap: str, log_path: Path, *args: str, port: int | None = None,
                 env: Mapping[str, str] | None = None, cwd: Path | None = None) -> None:
        super().__init__(log_path, port, env=env, cwd=cwd)
        self.bootstrap = bootstrap
        self.args = list(args)

    def command(self) -> list[str]:
        return bridge_command(self.address, self.bootstrap, "--stats-interval-s", "5", *self.args)

    def start(self, timeout: float = 60.0) -> BridgeProcess:
        """A deadline, not a wait: with parallel test workers a start can take a while."""
        super().start(timeout)
        return self


def _listening_inodes(port: int) -> set[str]:
    """Inodes of the IPv4 TCP sockets listening on ``port`` (state 0A)."""
    inodes: set[str] = set()
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            parts = line.split()
            if parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(parts[9])
    return inodes


def _socket_inodes(pid: int) -> set[str]:
    out: set[str] = set()
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(f"{fd_dir}/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(target[8:-1])
    return out


class SharedPortBridge(BridgeProcess):
    """A bridge process that shares its port with others (``--reuse-port``).

    Connecting cannot tell the processes on one port apart, so it is ready once its own
    pid holds a listening socket on the port (``/proc/net/tcp`` against ``/proc/PID/fd``).
    """

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if not self.running:
                self._forget()
                raise self.start_error(self._exited_message())
            if self.proc is not None:
                try:
                    if _socket_inodes(self.proc.pid) & _listening_inodes(self.port):
                        return
                except OSError:
                    pass
            if time.monotonic() > deadline:
                self.stop(5)
                raise self.start_error(f"{self.name} not listening on {self.address} after "
                                       f"{timeout:.0f}s\n--- output ---\n{self.tail()}")
            time.sleep(0.05)


class MosquittoProcess(ListeningChild):
    """Debian's mosquitto, listening on 127.0.0.1 only; persistence off unless asked.

    With ``persistence`` mosquitto keeps its database in ``workdir`` and writes it every
    ``autosave_interval`` seconds (1 here; mosquitto never writes it per message).
    """

    name = "mosquitto"

    def __init__(self, workdir: Path, binary: str = "mosquitto", port: int | None = None,
                 *, persistence: bool = False) -> None:
        super().__init__(workdir / "mosquitto.log", port)
        self.binary = binary
        self.conf = workdir / "mosquitto.conf"
        workdir.mkdir(parents=True, exist_ok=True)
        stored = (f"persistence true\npersistence_location {workdir}/\nautosave_interval 1\n"
                  if persistence else "persistence false\n")
        self.conf.write_text(
            f"listener {self.port} {HOST}\nallow_anonymous true\n{stored}"
            "max_inflight_messages 32\nmax_queued_messages 1000\nlog_dest stderr\n"
            "log_type error\nlog_type warning\n"
        )

    def command(self) -> list[str]:
        return [self.binary, "-c", str(self.conf)]


def mosquitto_pub(port: int, *args: str) -> None:
    """Publish with Debian's mosquitto_pub (``args`` as on its command line)."""
    r = subprocess.run(["mosquitto_pub", "-h", HOST, "-p", str(port), *args],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


def stats_lines(bridge: BridgeProcess) -> list[dict[str, Any]]:
    """The bridge's periodic counters (JSON log lines, every 5 s in tests)."""
    out = []
    for line in bridge.output().splitlines():
        with contextlib.suppress(ValueError):
            rec = json.loads(line)
            if isinstance(rec, dict) and rec.get("event") == "stats":
                out.append(rec)
    return out


def wait_for_counters(bridge: BridgeProcess, at_least: dict[str, int], timeout: float = 20) -> dict[str, Any]:
    """The bridge's newest counters once each of ``at_least`` has reached its value."""
    deadline = time.monotonic() + timeout
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        lines = stats_lines(bridge)
        if lines:
            last = lines[-1]
            if all(last.get(k, 0) >= v for k, v in at_least.items()):
                return last
        time.sleep(0.2)
    raise AssertionError(f"counters {at_least} not reached; last stats: {last}")
