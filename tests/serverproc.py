"""Run the real ``logserver`` as a subprocess for integration tests.

Only ever on 127.0.0.1.  Every process started here is stopped by its pid: by the
pytest fixtures' finalizers, by an ``atexit`` hook, and (Linux) by the kernel when
the test runner dies (``PR_SET_PDEATHSIG``), so a failing or killed test run leaves
no server behind.
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
import threading
import time
from pathlib import Path

from logserver.localports import free_port

HOST = "127.0.0.1"
REPO_ROOT = Path(__file__).resolve().parent.parent

# Every ServerProcess whose process may still be alive: stopped at interpreter exit.
_LIVE: set[ServerProcess] = set()
_LIVE_LOCK = threading.Lock()


class ServerStartError(RuntimeError):
    """The server did not come up (exited early or never accepted a connection)."""


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except Exception:  # noqa: BLE001 - best effort, never block the exec
        pass


def can_connect(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


class ServerProcess:
    """One ``logserver`` process: ``python -m logserver`` with flags built from settings.

    ``settings`` maps Kafka-style names to values and become ``--name value`` flags.
    ``log.dirs`` (the data dir) and ``listeners`` (127.0.0.1 and a free port) are
    passed as flags unless ``base_flags=False`` (for tests of env/config-file settings,
    which then have to bring them themselves).
    """

    def __init__(
        self,
        data_dir: Path | str | None,
        *,
        settings: dict[str, object] | None = None,
        env: dict[str, str] | None = None,
        config_file: Path | str | None = None,
        port: int | None = None,
        cwd: Path | str | None = None,
        log_path: Path | str | None = None,
        base_flags: bool = True,
        startup_timeout: float = 20.0,
        extra_args: list[str] | tuple[str, ...] = (),
    ) -> None:
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.settings = dict(settings or {})
        self.env = dict(env or {})
        self.config_file = Path(config_file) if config_file is not None else None
        self.port = port if port is not None else free_port()
        self.cwd = Path(cwd) if cwd is not None else None
        self.base_flags = base_flags
        self.startup_timeout = startup_timeout
        self.extra_args = list(extra_args)
        if log_path is None:
            base = self.data_dir.parent if self.data_dir is not None else Path(self.cwd or ".")
            log_path = base / f"logserver-{self.port}.log"
        self.log_path = Path(log_path)
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.exit_codes: list[int] = []

    # ---- addresses -------------------------------------------------------------
    @property
    def host(self) -> str:
        return HOST

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:PORT``, the bootstrap string for every client."""
        return f"{HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    # ---- command line ----------------------------------------------------------
    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "logserver"]
        if self.config_file is not None:
            cmd += ["--config", str(self.config_file)]
        if self.base_flags:
            if self.data_dir is not None:
                cmd += ["--log.dirs", str(self.data_dir)]
            cmd += ["--listeners", f"PLAINTEXT://{HOST}:{self.port}"]
        for name, value in self.settings.items():
            cmd += [f"--{name}", _setting_str(value)]
        cmd += self.extra_args
        return cmd

    def _environ(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOGSERVER_")}
        # The repo on the path even when the package is not pip-installed.
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p
        )
        env["PYTHONUNBUFFERED"] = "1"
        env.update(self.env)
        return env

    # ---- life cycle ------------------------------------------------------------
    def start(self, wait: bool = True) -> ServerProcess:
        if self.running:
            raise RuntimeError(f"logserver already running (pid {self.pid})")
        if self.data_dir is not None:
            self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        cmd = self.command()
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== start #{self.starts}: {' '.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=str(self.cwd) if self.cwd is not None else str(REPO_ROOT),
                env=self._environ(),
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        with _LIVE_LOCK:
            _LIVE.add(self)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until a TCP connect to the port succeeds; raise with the server log if not."""
        timeout = self.startup_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            code = self.proc.poll() if self.proc is not None else None
            if code is not None:
                self._forget()
                raise ServerStartError(
                    f"logserver exited with code {code} before accepting connections on "
                    f"{self.bootstrap}\ncommand: {' '.join(self.command())}\n"
                    f"--- server output ---\n{self.output_tail()}"
                )
            if can_connect(self.port, timeout=0.5):
                return
            if time.monotonic() > deadline:
                self._terminate_quietly()
                raise ServerStartError(
                    f"logserver did not accept connections on {self.bootstrap} within "
                    f"{timeout:.0f}s\ncommand: {' '.join(self.command())}\n"
                    f"--- server output ---\n{self.output_tail()}"
                )
            time.sleep(0.05)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, wait up to ``timeout``; SIGKILL if still alive. Returns the exit code."""
        if self.proc is None:
            return None
        proc = self.proc
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._append_log(f"===== did not stop {timeout}s after SIGTERM: SIGKILL\n")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
                self.exit_codes.append(proc.returncode)
                self._forget()
                return None  # never stopped by itself: callers asserting 0 will see None
        self.exit_codes.append(proc.returncode)
        self._append_log(f"===== exited with code {proc.returncode}\n")
        self._forget()
        return proc.returncode

    def kill9(self) -> None:
        """SIGKILL: an unclean stop (no flush, no shutdown hooks)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.exit_codes.append(self.proc.returncode)
        self._append_log("===== killed with SIGKILL\n")
        self._forget()

    def restart(self, *, clean: bool = True, wait: bool = True, **changes) -> int | None:
        """Stop (SIGTERM, or SIGKILL when ``clean=False``) and start again on the same port
        and data dir. ``changes`` may replace settings/env/config_file. Returns the stop's
        exit code (None after a kill)."""
        code = self.stop() if clean else self.kill9()
        for name, value in changes.items():
            if not hasattr(self, name):
                raise TypeError(f"unknown ServerProcess attribute {name}")
            setattr(self, name, value)
        self.start(wait=wait)
        return code

    def _terminate_quietly(self) -> None:
        with contextlib.suppress(Exception):
            self.stop(timeout=5)

    def _forget(self) -> None:
        with _LIVE_LOCK:
            _LIVE.discard(self)

    # ---- output ----------------------------------------------------------------
    def _append_log(self, text: str) -> None:
        with contextlib.suppress(OSError), open(self.log_path, "a") as f:
            f.write(text)

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def output_tail(self, max_chars: int = 8000) -> str:
        text = self.output()
        if len(text) > max_chars:
            text = "[... cut ...]\n" + text[-max_chars:]
        return text

    # ---- data dir ---------------------------------------------------------------
    def partition_dir(self, topic: str, partition: int) -> Path:
        assert self.data_dir is not None
        return self.data_dir / f"{topic}-{partition}"

    def segment_files(self, topic: str, partition: int) -> list[Path]:
        """The ``.log`` files of one partition (Kafka's layout: ``<dir>/<topic>-<p>/*.log``)."""
        assert self.data_dir is not None
        found = sorted(self.data_dir.rglob(f"{topic}-{partition}/*.log"))
        return found

    def __enter__(self) -> ServerProcess:
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<ServerProcess {self.bootstrap} pid={self.pid} data={self.data_dir}>"


def _setting_str(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def run_cli(
    args: list[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | str | None = None,
    timeout: float = 30.0,
) -> subprocess.CompletedProcess:
    """Run ``python -m logserver ARGS`` to completion (for --help and bad settings)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("LOGSERVER_")}
    full_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "logserver", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=str(cwd) if cwd is not None else str(REPO_ROOT),
        env=full_env,
        timeout=timeout,
        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
    )


@atexit.register
def _stop_all() -> None:
    with _LIVE_LOCK:
        live = list(_LIVE)
    for server in live:
        with contextlib.suppress(Exception):
            if server.proc is not None and server.proc.poll() is None:
                os.kill(server.proc.pid, signal.SIGKILL)
                server.proc.wait(timeout=5)
