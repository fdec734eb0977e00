"""Run the MQTT bridge beside the broker as a supervised child process (``--mqtt-bridge``).

A separate process, not a task in the broker's event loop: the bridge then has a core
of its own, and a bridge failure never takes the log down. It talks to the broker over
the Kafka protocol on the broker's own advertised listener, like any other client.

The supervisor restarts a bridge that dies, with exponential backoff (capped, reset
after a long enough run), and logs each death and restart. A bridge that cannot listen
on its port (it exits with ``EXIT_CANNOT_LISTEN``) or rejects its arguments will not do
better on a retry: the supervisor then gives up with one error line, and the server
stops and exits non-zero instead of serving on without its bridge.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from commonlib.bridge_exit import EXIT_CANNOT_LISTEN, EXIT_USAGE
from commonlib.childproc import ChildProcess
from logserver.restart_backoff import (
    FIRST_BACKOFF_SECONDS,
    MAX_BACKOFF_SECONDS,
    RestartBackoff,
    describe_exit,
)

log = logging.getLogger(__name__)

STOP_TIMEOUT_SECONDS = 10.0


def bridge_command(listen: str, bootstrap: str, *extra_args: str) -> list[str]:
    """The command line of an mqtt-bridge on ``listen`` writing to ``bootstrap``."""
    return [sys.executable, "-m", "mqtt_bridge", "--listen", listen,
            "--bootstrap-servers", bootstrap, *extra_args]


class BridgeSupervisor:
    """Keeps one mqtt-bridge child running until :meth:`stop`; :meth:`run` is its task."""

    def __init__(self, listen: str, bootstrap: str, extra_args: Sequence[str] = (), *,
                 first_backoff: float = FIRST_BACKOFF_SECONDS,
                 max_backoff: float = MAX_BACKOFF_SECONDS, pass_fds: Sequence[int] = ()) -> None:
        self.listen = listen
        self.pass_fds = tuple(pass_fds)
        self.command = bridge_command(listen, bootstrap, *extra_args)
        self.first_backoff = first_backoff
        self.max_backoff = max_backoff
        self.child: ChildProcess | None = None
        self.restarts = 0
        self._stopping = asyncio.Event()

    async def run(self) -> str | None:
        """Start, watch and restart the bridge. Returns None once stopped, or the reason
        it gave up (already logged) when restarting cannot help."""
        loop = asyncio.get_running_loop()
        backoff = RestartBackoff(self.first_backoff, self.max_backoff)
        while not self._stopping.is_set():
            # Started from the event loop's thread: PR_SET_PDEATHSIG follows the thread
            # that forked, and this one lives as long as the server.
            if self.restarts:
                log.info("restarting mqtt-bridge (restart %d)", self.restarts)
            child = ChildProcess(argv=self.command, name="mqtt-bridge", env=os.environ,
                                 cwd=Path.cwd(), pass_fds=self.pass_fds)
            self.child = child.spawn()
            started = loop.time()
            assert child.proc is not None
            code = await asyncio.to_thread(child.proc.wait)
            if self._stopping.is_set():
                return None
            if code == EXIT_CANNOT_LISTEN:
                reason = (f"mqtt-bridge cannot listen on {self.listen} (see its error above); "
                          f"stopping logserver")
                log.error("%s", reason)
                return reason
            if code == EXIT_USAGE:
                reason = "mqtt-bridge refused its arguments (exit code 2); stopping logserver"
                log.error("%s", reason)
                return reason
            delay = backoff.after_death(loop.time() - started)
            log.warning("mqtt-bridge (pid %d) died (%s); restarting it in %.1f s",
                        child.pid, describe_exit(code), delay)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), delay)
            self.restarts += 1
        return None

    async def stop(self) -> None:
        """Stop supervising and stop the bridge (SIGTERM, SIGKILL after a grace period)."""
        self._stopping.set()
        if self.child is not None and self.child.running:
            await asyncio.to_thread(self.child.stop, STOP_TIMEOUT_SECONDS)
