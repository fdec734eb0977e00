"""Run the real ``logserver`` as a subprocess for integration tests.

Only ever on 127.0.0.1. The process is managed by :mod:`commonlib.childproc` (the one
process manager): stopped by its pid by the pytest fixtures' finalizers, by an
``atexit`` hook, and (Linux) by the kernel when the test runner dies.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from commonlib.childproc import (
    HOST,
    REPO_ROOT,
    ChildStartError,
    ListeningChild,
    can_connect,
    free_port,
    python_path_env,
)

__all__ = ["HOST", "REPO_ROOT", "TEST_DEFAULTS", "ServerProcess", "ServerStartError",
           "can_connect", "free_port", "run_cli"]


# What Kafka's own test brokers set (TestUtils.createBrokerConfig): a fresh group's first
# rebalance completes at once instead of waiting 3 s for more members. A test that sets
# one of these itself (settings, env, config file) keeps its value; base_flags=False
# servers (tests of env/config-file settings) get none of them.
TEST_DEFAULTS: dict[str, object] = {"group.initial.rebalance.delay.ms": 0}


class ServerStartError(ChildStartError):
    """The server did not come up (exited early or never accepted a connection)."""


def _server_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Ours without any ``LOGSERVER_*`` setting but a free admin port, this tree on
    PYTHONPATH, then ``extra``."""
    env = {k: v for k, v in python_path_env().items() if not k.startswith("LOGSERVER_")}
    # Test servers run side by side: never Redpanda's default admin port 9644 (a free
    # one instead; a --admin.listeners flag, as ServerProcess passes, takes precedence).
    env["LOGSERVER_ADMIN_LISTENERS"] = f"http://{HOST}:0"
    # Nor Confluent's REST Proxy port 8082: off unless a test sets rest.proxy.listeners.
    env["LOGSERVER_REST_PROXY_LISTENERS"] = ""
    env.update(extra or {})
    return env


class ServerProcess(ListeningChild):
    """One ``logserver`` process: ``python -m logserver`` with flags built from settings.

    ``settings`` maps Kafka-style names to values and become ``--name value`` flags.
    ``log.dirs`` (the data dir) and ``listeners`` (127.0.0.1 and a free port) are
    passed as flags unless ``base_flags=False`` (for tests of env/config-file settings,
    which then have to bring them themselves). ``launcher`` replaces ``-m logserver``
    (e.g. the test-only fault-injection launcher, which then runs logserver itself).
    ``netns`` runs it inside that network namespace (``ip netns exec``, which execs: the
    pid is the server's own), listening on ``host`` there (tests/helpers/netns.py).
    """

    name = "logserver"
    start_error = ServerStartError

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
        startup_timeout: float = 60.0,  # a deadline, not a wait: parallel workers load the machine
        extra_args: list[str] | tuple[str, ...] = (),
        launcher: list[str] | tuple[str, ...] = ("-m", "logserver"),
        netns: str | None = None,
        host: str = HOST,
    ) -> None:
        self.data_dir = Path(data_dir) if data_dir is not None else None
        port = port if port is not None else free_port()
        if log_path is None:
            base = self.data_dir.parent if self.data_dir is not None else Path(cwd or ".")
            log_path = base / f"logserver-{port}.log"
        super().__init__(Path(log_path), port, cwd=Path(cwd) if cwd is not None else None)
        self.settings = dict(settings or {})
        self.extra_env = dict(env or {})
        self.config_file = Path(config_file) if config_file is not None else None
        self.base_flags = base_flags
        self.startup_timeout = startup_timeout
        self.extra_args = list(extra_args)
        self.launcher = list(launcher)
        self.netns = netns
        self.host = host
        # Never the default 9644: test servers run side by side.
        self.admin_port = free_port()
        self.starts = 0
        self.exit_codes: list[int] = []

    # ---- addresses -------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        """``HOST:PORT`` (127.0.0.1 but in a namespace), the bootstrap string for clients."""
        return self.address

    @property
    def admin_url(self) -> str:
        """Base URL of the admin HTTP API (``admin.listeners``) of this server."""
        return f"http://{HOST}:{self.admin_port}"

    # ---- command line ----------------------------------------------------------
    def command(self) -> list[str]:
        cmd = [sys.executable, *self.launcher]
        if self.netns is not None:
            cmd = ["ip", "netns", "exec", self.netns, *cmd]
        if self.config_file is not None:
            cmd += ["--config", str(self.config_file)]
        if self.base_flags:
            if self.data_dir is not None:
                cmd += ["--log.dirs", str(self.data_dir)]
            cmd += ["--listeners", f"PLAINTEXT://{self.host}:{self.port}"]
            if "admin.listeners" not in self.settings:
                cmd += ["--admin.listeners", f"http://{HOST}:{self.admin_port}"]
            cmd += self._test_defaults()
        for name, value in self.settings.items():
            cmd += [f"--{name}", _setting_str(value)]
        cmd += self.extra_args
        return cmd

    def _test_defaults(self) -> list[str]:
        """Flags for ``TEST_DEFAULTS`` the test did not set itself (in settings, flags,
        environment or its config file)."""
        file_text = (self.config_file.read_text()
                     if self.config_file is not None and self.config_file.exists() else "")
        flags: list[str] = []
        for name, value in TEST_DEFAULTS.items():
            env_name = "LOGSERVER_" + name.upper().replace(".", "_")
            if (name in self.settings or env_name in self.extra_env or name in file_text
                    or any(arg.startswith(f"--{name}") for arg in self.extra_args)):
                continue
            flags += [f"--{name}", _setting_str(value)]
        return flags

    def env(self) -> dict[str, str]:
        return _server_env(self.extra_env)

    def banner(self, command: list[str]) -> str:
        return f"start #{self.starts}: {' '.join(command)}"

    # ---- life cycle ------------------------------------------------------------
    def start(self, wait: bool = True) -> ServerProcess:  # type: ignore[override]  # wait flag, not a timeout
        if self.data_dir is not None:
            self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        self.spawn()
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until a TCP connect to the port succeeds; raise with the server log if not."""
        super().wait_ready(self.startup_timeout if timeout is None else timeout)

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, wait up to ``timeout``; SIGKILL if still alive. Returns the exit code,
        None if it had to be killed (callers asserting a clean stop see that)."""
        was_running = self.running
        code = super().stop(timeout)
        if code is None:
            return None
        if was_running or not self.exit_codes:
            self.exit_codes.append(code)
        return None if code == -9 and was_running else code

    def kill9(self) -> None:
        """SIGKILL: an unclean stop (no flush, no shutdown hooks)."""
        if self.proc is None:
            return
        super().kill9()
        assert self.proc.returncode is not None
        self.exit_codes.append(self.proc.returncode)

    def restart(self, *, clean: bool = True, wait: bool = True, **changes: object) -> int | None:
        """Stop (SIGTERM, or SIGKILL when ``clean=False``) and start again on the same port
        and data dir. ``changes`` may replace settings/env/config_file. Returns the stop's
        exit code (None after a kill)."""
        code = None
        if clean:
            code = self.stop()
        else:
            self.kill9()
        for name, value in changes.items():
            attribute = "extra_env" if name == "env" else name
            if not hasattr(self, attribute):
                raise TypeError(f"unknown ServerProcess attribute {name}")
            setattr(self, attribute, value)
        self.start(wait=wait)
        return code

    # ---- output ----------------------------------------------------------------
    def output_tail(self, max_chars: int = 8000) -> str:
        return self.tail(max_chars)

    # ---- data dir ---------------------------------------------------------------
    def partition_dir(self, topic: str, partition: int) -> Path:
        assert self.data_dir is not None
        return self.data_dir / f"{topic}-{partition}"

    def segment_files(self, topic: str, partition: int) -> list[Path]:
        """The ``.log`` files of one partition (Kafka's layout: ``<dir>/<topic>-<p>/*.log``).

        The layout is ours: a partition directory with no segment file at all is a
        failure here; a partition never written has no directory yet (made lazily by
        its first append) and no segment.
        """
        assert self.data_dir is not None
        if not self.partition_dir(topic, partition).exists():
            return []
        found = sorted(self.partition_dir(topic, partition).glob("*.log"))
        assert found, (f"no segment file {self.partition_dir(topic, partition)}/*.log: the "
                       f"data directory holds {sorted(p.name for p in self.data_dir.iterdir())}")
        return found

    def __enter__(self) -> ServerProcess:
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
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
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m logserver ARGS`` to completion (for --help and bad settings)."""
    return subprocess.run(
        [sys.executable, "-m", "logserver", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=str(cwd) if cwd is not None else str(REPO_ROOT),
        env=_server_env(env),
        timeout=timeout,
        start_new_session=True,
    )

