"""A server started as a child process: ready when it accepts TCP on 127.0.0.1, stopped by pid.

Shared by the bridge's test helpers, the Spark demo and the benchmarks. Each child is
stopped by its pid (SIGTERM, then SIGKILL), by an ``atexit`` hook, and on Linux by the
kernel when the parent dies (``PR_SET_PDEATHSIG``), so nothing is left behind.
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

from logserver.localports import HOST, free_port

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent
_LIVE: set[ListeningChild] = set()


def can_connect(port: int, timeout: float = 0.3) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


def _die_with_parent() -> None:  # in the child, between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


class ListeningChild:
    """A child process that listens on ``port``; its output goes to ``log_path``."""

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

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 30.0) -> ListeningChild:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        command = self.command()
        with open(self.log_path, "ab") as out:
            out.write(f"\n===== {' '.join(command)}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env=self.env(), cwd=str(REPO_ROOT), start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        _LIVE.add(self)
        log.info("started %s (pid %d) on %s:%d, output in %s", self.name, self.proc.pid, HOST,
                 self.port, self.log_path)
        deadline = time.monotonic() + timeout
        while not can_connect(self.port):
            if self.proc.poll() is not None:
                _LIVE.discard(self)
                raise RuntimeError(f"{self.name} exited ({self.proc.returncode}):\n{self.tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} not listening on port {self.port} after "
                                   f"{timeout}s:\n{self.tail()}")
            time.sleep(0.05)
        return self

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM by pid, SIGKILL if still alive after ``timeout``; returns the exit code."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("%s (pid %d) ignored SIGTERM for %.0fs: SIGKILL", self.name, proc.pid, timeout)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(5)
            log.info("stopped %s (pid %d, exit code %s)", self.name, proc.pid, proc.returncode)
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

    def tail(self, chars: int = 4000) -> str:
        return self.output()[-chars:]


@atexit.register
def _stop_all() -> None:
    for child in list(_LIVE):
        with contextlib.suppress(Exception):
            child.kill9()
