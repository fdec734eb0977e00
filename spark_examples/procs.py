"""Child processes for the demo (logserver, mqtt-bridge): started, waited for, stopped.

Every child listens on 127.0.0.1 only, on a port that was free a moment before, in
its own session (so a terminal Ctrl-C reaches the demo, which then stops the children
in order). Each child is stopped by its pid: SIGTERM, then SIGKILL after a grace
period; by an ``atexit`` hook; and on Linux by the kernel when the demo dies
(``PR_SET_PDEATHSIG``), so nothing is left behind.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from logserver.childproc import ListeningChild
from logserver.localports import HOST, free_port


class Child(ListeningChild):
    """One child process that is ready once it accepts TCP connections on ``port``."""

    def __init__(self, name: str, command: list[str], port: int, log_path: Path) -> None:
        super().__init__(log_path, port)
        self.name = name
        self._command = command

    def command(self) -> list[str]:
        return self._command


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


def mqtt_bridge(bootstrap: str, log_path: Path, *args: str, port: int | None = None) -> Child:
    """An mqtt-bridge child against ``bootstrap`` on a free MQTT port (not started yet);
    ``args`` are more mqtt-bridge flags."""
    port = port or free_port()
    cmd = [
        sys.executable, "-m", "mqtt_bridge",
        "--listen", f"{HOST}:{port}",
        "--bootstrap-servers", bootstrap,
        "--log-format", "text",
        *args,
    ]
    return Child("mqtt-bridge", cmd, port, log_path)
