"""The children of ``logserver cluster up`` after start-up: one that dies is reported and
restarted with the bridge supervisor's backoff (logserver/restart_backoff.py) while the
others keep running; one whose exit says a restart cannot help (bad settings, a damaged
log) is reported and left down. Also the one line a child's start-up error is told in.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from commonlib.childproc import ChildProcess
from logserver.restart_backoff import RestartBackoff, describe_exit

log = logging.getLogger(__name__)

#: Exit codes of `logserver` that a restart cannot cure (logserver/cli.py): 2 a bad flag or
#: setting, 3 a log damaged beyond a torn tail.
HOPELESS_EXITS = (2, 3)


def start_error_line(output: str) -> str:
    """The line that says why a child stopped, from its log file's last run: its
    ``logserver: ...`` line, else its last ERROR record (text or JSON), else its last
    line."""
    run = output.rsplit("\n===== ", 1)[-1]
    lines = [li.strip() for li in run.splitlines()[1:]
             if li.strip() and not li.startswith("===== ")]
    for line in reversed(lines):
        if line.startswith("logserver: "):
            return line[len("logserver: "):]
    for line in reversed(lines):
        if line.startswith("{"):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("level") in ("ERROR", "CRITICAL"):
                return str(record.get("msg", line))
        elif " ERROR " in line or " CRITICAL " in line:
            return line
    if lines and lines[-1].startswith(("Traceback", "  File")):
        return lines[-1]
    return lines[-1] if lines else "(no output)"


@dataclass
class Supervised:
    """One child and its restart state."""

    child: ChildProcess
    backoff: RestartBackoff = field(default_factory=RestartBackoff)
    started: float = field(default_factory=time.monotonic)
    restart_at: float | None = None  # when a dead child is due for its restart
    given_up: bool = False
    restarts: int = 0


class Supervisor:
    """Polled from ``cluster up``'s main loop: notices deaths, restarts when due."""

    def __init__(self, children: Sequence[ChildProcess],
                 on_restart: Callable[[ChildProcess], None] | None = None) -> None:
        self.entries = [Supervised(c) for c in children]
        self._on_restart = on_restart

    def poll(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        for entry in self.entries:
            child = entry.child
            if entry.given_up or child.running:
                continue
            if entry.restart_at is None:
                code = child.returncode
                reason = "no exit code" if code is None else describe_exit(code)
                if code in HOPELESS_EXITS:
                    entry.given_up = True
                    log.error("%s (pid %s) exited (%s): %s; not restarting it, the others "
                              "keep running", child.name, child.pid, reason,
                              start_error_line(child.output()))
                    continue
                delay = entry.backoff.after_death(now - entry.started)
                entry.restart_at = now + delay
                log.warning("%s (pid %s) died (%s); restarting it in %.1f s", child.name,
                            child.pid, reason, delay)
            elif now >= entry.restart_at:
                entry.restart_at = None
                entry.restarts += 1
                entry.started = now
                child.spawn()
                log.info("restarted %s (pid %s, restart %d)", child.name, child.pid,
                         entry.restarts)
                if self._on_restart is not None:
                    self._on_restart(child)
