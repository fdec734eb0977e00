"""mqtt-bridge and mosquitto as child processes on 127.0.0.1, for tests and benchmarks.

Managed by :mod:`logserver.childproc`: each is stopped by its pid (SIGTERM, then SIGKILL),
by an ``atexit`` hook, and by the kernel if the parent dies (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

from pathlib import Path

from logserver.bridge_process import bridge_command
from logserver.childproc import HOST, ListeningChild

__all__ = ["HOST", "BridgeProcess", "MosquittoProcess"]


class BridgeProcess(ListeningChild):
    """``python -m mqtt_bridge`` against ``bootstrap``, extra flags as given."""

    name = "mqtt-bridge"

    def __init__(self, bootstrap: str, log_path: Path, *args: str, port: int | None = None) -> None:
        super().__init__(log_path, port)
        self.bootstrap = bootstrap
        self.args = list(args)

    def command(self) -> list[str]:
        return bridge_command(self.address, self.bootstrap, "--stats-interval-s", "5", *self.args)


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
