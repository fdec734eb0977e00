"""Start and stop real processes (mqtt-bridge, mosquitto) for tests and benchmarks.

Only on 127.0.0.1; each process is stopped by its pid (SIGTERM, then SIGKILL), by an
``atexit`` hook, and by the kernel if the parent dies (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from logserver.localports import free_port

HOST = "127.0.0.1"
REPO_ROOT = Path(__file__).resolve().parent.parent
_LIVE: set[ManagedProcess] = set()


def can_connect(port: int, timeout: float = 0.3) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


def _die_with_parent() -> None:
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)


class ManagedProcess:
    """A child process listening on ``port``; output goes to ``log_path``."""

    name = "process"

    def __init__(self, log_path: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.log_path = Path(log_path)
        self.proc: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def start(self, timeout: float = 30.0) -> ManagedProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== {' '.join(self.command())}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=self.env(), cwd=str(REPO_ROOT), start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        _LIVE.add(self)
        deadline = time.monotonic() + timeout
        while not can_connect(self.port):
            if self.proc.poll() is not None:
                _LIVE.discard(self)
                raise RuntimeError(f"{self.name} exited ({self.proc.returncode}):\n{self.output()[-4000:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} not listening after {timeout}s:\n{self.output()[-4000:]}")
            time.sleep(0.05)
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> int | None:
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(5)
        _LIVE.discard(self)
        return proc.returncode

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        _LIVE.discard(self)

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


class BridgeProcess(ManagedProcess):
    """``python -m mqtt_bridge`` against ``bootstrap``, extra flags as given."""

    name = "mqtt-bridge"

    def __init__(self, bootstrap: str, log_path: Path, *args: str, port: int | None = None) -> None:
        super().__init__(log_path, port)
        self.bootstrap = bootstrap
        self.args = list(args)

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "mqtt_bridge", "--listen", f"{HOST}:{self.port}",
            "--bootstrap-servers", self.bootstrap, "--stats-interval-s", "5", *self.args,
        ]


class MosquittoProcess(ManagedProcess):
    """Debian's mosquitto with persistence off, listening on 127.0.0.1 only."""

    name = "mosquitto"

    def __init__(self, workdir: Path, binary: str = "mosquitto", port: int | None = None) -> None:
        super().__init__(workdir / "mosquitto.log", port)
        self.binary = binary
        self.conf = workdir / "mosquitto.conf"
        workdir.mkdir(parents=True, exist_ok=True)
        self.conf.write_text(
            f"listener {self.port} {HOST}\nallow_anonymous true\npersistence false\n"
            "max_inflight_messages 32\nmax_queued_messages 1000\nlog_dest stderr\n"
            "log_type error\nlog_type warning\n"
        )

    def command(self) -> list[str]:
        return [self.binary, "-c", str(self.conf)]


@atexit.register
def _stop_all() -> None:
    for p in list(_LIVE):
        with contextlib.suppress(Exception):
            p.kill9()
