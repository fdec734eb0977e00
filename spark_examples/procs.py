"""Child processes for the demo (logserver, mqtt-bridge): started, waited for, stopped.

Every child listens on 127.0.0.1 only, on a port that was free a moment before, in
its own session (so a terminal Ctrl-C reaches the demo, which then stops the children
in order). Each child is stopped by its pid: SIGTERM, then SIGKILL after a grace
period; by an ``atexit`` hook; and on Linux by the kernel when the demo dies
(``PR_SET_PDEATHSIG``), so nothing is left behind.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from logserver.localports import free_port

log = logging.getLogger(__name__)
HOST = "127.0.0.1"
_LIVE: set[Child] = set()


def can_connect(port: int, timeout: float = 0.3) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


def _die_with_parent() -> None:  # in the child, between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


class Child:
    """One child process that is ready once it accepts TCP connections on ``port``."""

    def __init__(self, name: str, command: list[str], port: int, log_path: Path) -> None:
        self.name = name
        self.command = command
        self.port = port
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 30.0) -> Child:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        repo = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (repo, env.get("PYTHONPATH", "")) if p)
        env["PYTHONUNBUFFERED"] = "1"
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        _LIVE.add(self)
        log.info("started %s (pid %d) on %s:%d, output in %s", self.name, self.proc.pid, HOST, self.port, self.log_path)
        deadline = time.monotonic() + timeout_s
        while not can_connect(self.port):
            if self.proc.poll() is not None:
                _LIVE.discard(self)
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} not listening on port {self.port} after {timeout_s}s:\n{self.tail()}")
            time.sleep(0.05)
        return self

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def stop(self, timeout_s: float = 10.0) -> int | None:
        """SIGTERM by pid, SIGKILL if still alive after ``timeout_s``."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                log.warning("%s (pid %d) ignored SIGTERM for %.0fs: SIGKILL", self.name, proc.pid, timeout_s)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(5)
            log.info("stopped %s (pid %d, exit code %s)", self.name, proc.pid, proc.returncode)
        _LIVE.discard(self)
        return proc.returncode

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def logserver(data_dir: Path, log_path: Path, *, partitions: int = 3, port: int | None = None) -> Child:
    """A logserver child on a free port (not started yet)."""
    port = port or free_port()
    cmd = [
        sys.executable, "-m", "logserver",
        "--listeners", f"PLAINTEXT://{HOST}:{port}",
        "--log.dirs", str(data_dir),
        "--num.partitions", str(partitions),
    ]
    return Child("logserver", cmd, port, log_path)


def bridge_available() -> tuple[bool, str]:
    """Whether ``python -m mqtt_bridge`` has a runnable entry point here (and why not)."""
    try:
        r = subprocess.run(
            [sys.executable, "-m", "mqtt_bridge", "--help"],
            capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"python -m mqtt_bridge --help failed: {exc}"
    if r.returncode != 0 or "--bootstrap-servers" not in r.stdout or "--listen" not in r.stdout:
        return False, f"python -m mqtt_bridge --help exited {r.returncode}: {(r.stderr or r.stdout).strip()[-300:]}"
    return True, "python -m mqtt_bridge"


def mqtt_bridge(bootstrap: str, log_path: Path, *, port: int | None = None) -> Child:
    """An mqtt-bridge child against ``bootstrap`` on a free MQTT port (not started yet)."""
    port = port or free_port()
    cmd = [
        sys.executable, "-m", "mqtt_bridge",
        "--listen", f"{HOST}:{port}",
        "--bootstrap-servers", bootstrap,
        "--log-format", "text",
    ]
    return Child("mqtt-bridge", cmd, port, log_path)


@atexit.register
def _stop_all() -> None:
    for child in list(_LIVE):
        with contextlib.suppress(Exception):
            child.stop(timeout_s=5)
