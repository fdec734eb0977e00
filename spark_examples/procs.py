"""The demo's child processes (logserver, mqtt-bridge), managed by :mod:`commonlib.childproc`.

Every child listens on 127.0.0.1 only, on a port that was free a moment before, in its
own session (so a terminal Ctrl-C reaches the demo, which then stops the children in
order), and is stopped by its pid.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from commonlib.childproc import HOST, ListeningChild, free_port
from logserver.bridge_process import bridge_command

__all__ = ["HOST", "bridge_available", "logserver", "mqtt_bridge"]


def logserver(data_dir: Path, log_path: Path, *, partitions: int = 3, port: int | None = None) -> ListeningChild:
    """A logserver child on a free port (not started yet). Its admin API takes a free port
    too and its REST Proxy is off, so a demo never holds 9644 or 8082 that a running
    logserver (or another demo, or a test) wants."""
    port = port or free_port()
    cmd = [
        sys.executable, "-m", "logserver",
        "--listeners", f"PLAINTEXT://{HOST}:{port}",
        "--admin.listeners", f"http://{HOST}:{free_port()}",
        "--rest.proxy.listeners", "",
        "--log.dirs", str(data_dir),
        "--num.partitions", str(partitions),
    ]
    return ListeningChild(log_path, port, argv=cmd, name="logserver")


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


def mqtt_bridge(bootstrap: str, log_path: Path, *args: str,
                port: int | None = None) -> ListeningChild:
    """An mqtt-bridge child against ``bootstrap`` on a free MQTT port (not started yet);
    ``args`` are more mqtt-bridge flags."""
    port = port or free_port()
    cmd = bridge_command(f"{HOST}:{port}", bootstrap, "--log-format", "text", *args)
    return ListeningChild(log_path, port, argv=cmd, name="mqtt-bridge")
