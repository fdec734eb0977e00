"""Child processes on 127.0.0.1: started in their own session, tied to our life, stopped by pid.

The one process manager of the project: the ``--mqtt-bridge`` supervisor, ``logserver
cluster up`` (brokers, etcd), the Spark demo, the tests and the benchmarks all start their
children through it (programs use it, so it is installed, not test tooling). A child is stopped by
its own pid (its stop signal, then SIGKILL after a grace period), by an ``atexit`` hook,
and on Linux by the kernel when the thread that started it dies (``PR_SET_PDEATHSIG``),
so nothing is left behind. Ports come from :func:`free_port`.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
#: The tree holding our packages (a checkout, or site-packages when installed): children
#: get it first on PYTHONPATH, so they run the same code as we do.
REPO_ROOT = Path(__file__).resolve().parent.parent

_LIVE: set[ChildProcess] = set()
_LIVE_LOCK = threading.Lock()


class ChildStartError(RuntimeError):
    """The child exited before it was ready, or was not ready in time (message: its output)."""


#: ``LOW-HIGH``: :func:`free_port` hands out ports from ``LOW`` (included) to ``HIGH``
#: (excluded) only. Processes that run side by side (pytest-xdist workers: tests/conftest.py
#: gives each its own slice) are given disjoint ranges, so they never pick the same port.
PORT_RANGE_ENV = "CHILDPROC_PORTS"

_PORT_LOCK = threading.Lock()
_cursor: int | None = None  # the next port to try, in the current range


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago.

    A port picked by binding port 0 comes from the kernel's ephemeral range, and while
    a server is down for a restart that port can be handed to some client's outgoing
    connection; so pick below that range, where the kernel never assigns source ports.
    Ports are handed out in turn from a random start in the range (``CHILDPROC_PORTS``, else
    10000 up to the ephemeral range), so one process is handed a port again only after
    every other port of its range: ports picked for several servers before any of them
    binds never collide, and a port someone else holds is skipped.
    """
    return free_port_run(1)


def free_port_run(count: int) -> int:
    """The first of ``count`` consecutive ports that are all free (see :func:`free_port`)."""
    global _cursor
    low, high = port_range()
    size = high - low
    if size < count:
        raise RuntimeError(f"port range {low}-{high} holds fewer than {count} ports")
    with _PORT_LOCK:
        if _cursor is None or not low <= _cursor < high:
            _cursor = low + random.SystemRandom().randrange(size)
        for step in range(size):
            first = low + (_cursor - low + step) % size
            if first + count > high:
                continue
            if all(port_free(port) for port in range(first, first + count)):
                _cursor = low + (first + count - low) % size
                return first
    raise RuntimeError(f"no {count} free consecutive port(s) in {low}-{high}")


def port_range() -> tuple[int, int]:
    """Where :func:`free_port` picks: ``CHILDPROC_PORTS``, else below the ephemeral range."""
    text = os.environ.get(PORT_RANGE_ENV)
    if text:
        low_text, _, high_text = text.partition("-")
        return int(low_text), int(high_text)
    low = _ephemeral_range()[0]
    if low > 15000:
        return 10000, low
    return 1024, low  # an odd machine: still below the ephemeral range


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def port_free(port: int, *, reuse_address: bool = False) -> bool:
    """Whether a listener could bind ``127.0.0.1:port`` now (``cluster up`` checks its
    ports before it starts anything, with ``reuse_address`` as its servers bind: a port
    left in TIME_WAIT by the last run is free to them)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        if reuse_address:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
        return True


def can_connect(port: int, host: str = HOST, timeout: float = 0.3) -> bool:
    """Whether something accepts TCP connections on ``host:port`` right now."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _die_with_parent() -> None:  # in the child, between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def python_path_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Our environment with this source tree first on ``PYTHONPATH`` (run uninstalled too)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


class ChildProcess:
    """One child process; its output goes to ``log_path`` (``None``: our own stdout/stderr).

    ``argv`` gives the command, or a subclass overrides :meth:`command`. With
    ``capture_stdout`` the child's stdout is a pipe (``proc.stdout``) for the caller
    to read, and only its stderr goes to ``log_path``.
    """

    name = "process"
    #: The exception :meth:`wait_ready` raises (a subclass may name its own).
    start_error: type[ChildStartError] = ChildStartError
    #: What asks the child to stop cleanly (noida-db, for one, stops only on SIGINT).
    stop_signal: int = signal.SIGTERM

    def __init__(self, log_path: Path | None = None, *, argv: Sequence[str] | None = None,
                 name: str | None = None, env: Mapping[str, str] | None = None,
                 cwd: Path | None = None, capture_stdout: bool = False,
                 pass_fds: Sequence[int] = ()) -> None:
        self.log_path = Path(log_path) if log_path is not None else None
        self.argv = list(argv) if argv is not None else None
        if name is not None:
            self.name = name
        self._env = dict(env) if env is not None else None
        self._cwd = cwd
        self.capture_stdout = capture_stdout
        self.pass_fds = tuple(pass_fds)  # descriptors the child inherits (listening sockets)
        self.proc: subprocess.Popen[bytes] | None = None

    # ---- what to run ----------------------------------------------------------------
    def command(self) -> list[str]:
        if self.argv is None:
            raise NotImplementedError(f"{type(self).__name__} has no command")
        return list(self.argv)

    def env(self) -> dict[str, str]:
        """The child's environment: as given, else ours with this tree on PYTHONPATH."""
        return dict(self._env) if self._env is not None else python_path_env()

    def cwd(self) -> Path:
        return self._cwd if self._cwd is not None else REPO_ROOT

    def banner(self, command: list[str]) -> str:
        """The line that opens each start's output in the log file."""
        return " ".join(command)

    # ---- state ----------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.proc.poll() if self.proc is not None else None

    # ---- life cycle -----------------------------------------------------------------
    def spawn(self) -> ChildProcess:
        """Start the child and return at once (see :meth:`start` to wait until it is ready)."""
        if self.running:
            raise RuntimeError(f"{self.name} already running (pid {self.pid})")
        command = self.command()
        out: IO[bytes] | None = None
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            out = open(self.log_path, "ab")  # noqa: SIM115 - closed below, the child keeps its copy
            out.write(f"\n===== {self.banner(command)}\n".encode())
            out.flush()
        try:
            self.proc = subprocess.Popen(
                command, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if self.capture_stdout else out,
                stderr=out,
                env=self.env(), cwd=str(self.cwd()), start_new_session=True,
                pass_fds=self.pass_fds,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        finally:
            if out is not None:
                out.close()
        with _LIVE_LOCK:
            _LIVE.add(self)
        log.info("started %s (pid %d)%s", self.name, self.proc.pid,
                 f", output in {self.log_path}" if self.log_path is not None else "")
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Return once the child is ready to be used (a plain child: once started)."""
        if not self.running:
            raise self.start_error(self._exited_message())

    def start(self, timeout: float = 30.0) -> ChildProcess:
        """Start the child and wait until it is ready; raise ChildStartError if it is not."""
        self.spawn()
        self.wait_ready(timeout)
        return self

    def request_stop(self) -> None:
        """The stop signal by pid, without waiting (stop several children at once)."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, self.stop_signal)

    def stop(self, timeout: float = 10.0) -> int | None:
        """The stop signal by pid, SIGKILL if still alive after ``timeout``; the exit code."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, self.stop_signal)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("%s (pid %d) ignored signal %d for %.0f s: SIGKILL", self.name,
                            proc.pid, self.stop_signal, timeout)
                self.note(f"===== did not stop {timeout:.0f}s after signal {self.stop_signal}: SIGKILL")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)
            log.info("stopped %s (pid %d, exit code %s)", self.name, proc.pid, proc.returncode)
            self.note(f"===== exited with code {proc.returncode}")
        self._forget()
        return proc.returncode

    def kill9(self) -> None:
        """SIGKILL by pid: an unclean stop (no flush, no shutdown hooks)."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            self.note("===== killed with SIGKILL")
        self._forget()

    def _forget(self) -> None:
        if self.proc is not None and self.proc.stdout is not None and self.proc.poll() is not None:
            with contextlib.suppress(OSError):
                self.proc.stdout.close()
        with _LIVE_LOCK:
            _LIVE.discard(self)

    # ---- output ---------------------------------------------------------------------
    def note(self, line: str) -> None:
        """Append a line of our own to the child's log file (restarts, kills, exit codes)."""
        if self.log_path is not None:
            with contextlib.suppress(OSError), open(self.log_path, "a") as f:
                f.write(line + "\n")

    def output(self) -> str:
        if self.log_path is None:
            return ""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, chars: int = 4000) -> str:
        text = self.output()
        return text if len(text) <= chars else "[... cut ...]\n" + text[-chars:]

    def _exited_message(self) -> str:
        code = self.returncode
        return (f"{self.name} exited with code {code}\ncommand: {' '.join(self.command())}\n"
                f"--- output ---\n{self.tail()}")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} pid={self.pid}>"


class ListeningChild(ChildProcess):
    """A child that serves on ``127.0.0.1:port``: ready once it accepts TCP connections."""

    #: Where it serves: 127.0.0.1, or (tests of network partitions) an address inside a
    #: network namespace of the test's own.
    host: str = HOST

    def __init__(self, log_path: Path | None = None, port: int | None = None, *,
                 argv: Sequence[str] | None = None, name: str | None = None,
                 env: Mapping[str, str] | None = None, cwd: Path | None = None) -> None:
        super().__init__(log_path, argv=argv, name=name, env=env, cwd=cwd)
        self.port = port or free_port()

    @property
    def address(self) -> str:
        """``HOST:PORT`` (``127.0.0.1:PORT`` unless ``host`` says otherwise)."""
        return f"{self.host}:{self.port}"

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Wait until the port accepts a connection; raise with the child's output if not."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.running:  # first: another process may hold the port
                self._forget()
                raise self.start_error(self._exited_message())
            if can_connect(self.port, self.host):
                return
            if time.monotonic() > deadline:
                self.stop(5)
                raise self.start_error(f"{self.name} not listening on {self.address} after "
                                      f"{timeout:.0f}s\ncommand: {' '.join(self.command())}\n"
                                      f"--- output ---\n{self.tail()}")
            time.sleep(0.05)

    def start(self, timeout: float = 30.0) -> ListeningChild:
        super().start(timeout)
        return self


@atexit.register
def _stop_all() -> None:
    with _LIVE_LOCK:
        live = list(_LIVE)
    for child in live:
        with contextlib.suppress(Exception):
            child.kill9()
