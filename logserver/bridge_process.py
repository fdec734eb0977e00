"""Run the MQTT bridge beside the broker as a child process, for the one-command setup.

A separate process, not a task in the broker's event loop: the bridge then has a core
of its own, and a bridge failure never takes the log down. It talks to the broker over
the Kafka protocol on the broker's own advertised listener, like any other client.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import subprocess
import sys

log = logging.getLogger(__name__)

STOP_TIMEOUT_SECONDS = 10.0


class BridgeProcess:
    def __init__(self, listen: str, bootstrap: str, extra_args: list[str] | None = None) -> None:
        self.command = [sys.executable, "-m", "mqtt_bridge", "--listen", listen,
                        "--bootstrap-servers", bootstrap, *(extra_args or [])]
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(self.command)
        log.info("started mqtt-bridge (pid %d): %s", self.process.pid, " ".join(self.command[1:]))

    async def stop(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.to_thread(process.wait), STOP_TIMEOUT_SECONDS)
        except TimeoutError:
            log.warning("mqtt-bridge (pid %d) did not stop in %.0f s; killing it",
                        process.pid, STOP_TIMEOUT_SECONDS)
            process.kill()
            await asyncio.to_thread(process.wait)
        log.info("mqtt-bridge stopped (exit code %s)", process.returncode)
