"""When to restart a supervised child that died: exponential backoff, capped, reset
after a long enough run. Shared by the ``--mqtt-bridge`` supervisor
(logserver/bridge_process.py) and ``logserver cluster up`` (logserver/cluster/local.py),
so a crash loop slows down the same way everywhere."""

from __future__ import annotations

import signal

FIRST_BACKOFF_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 30.0
#: A child that ran this long before dying starts over at the first backoff.
STABLE_RUN_SECONDS = 60.0


class RestartBackoff:
    """The delay before each restart of one child: doubles per quick death, up to a cap."""

    def __init__(self, first: float = FIRST_BACKOFF_SECONDS,
                 maximum: float = MAX_BACKOFF_SECONDS,
                 stable_run: float = STABLE_RUN_SECONDS) -> None:
        self.first = first
        self.maximum = maximum
        self.stable_run = stable_run
        self._next = first

    def after_death(self, ran_for: float) -> float:
        """The delay before restarting a child that died after running ``ran_for`` s."""
        if ran_for >= self.stable_run:
            self._next = self.first
        delay = self._next
        self._next = min(self._next * 2, self.maximum)
        return delay


def describe_exit(code: int) -> str:
    """``exit code 1`` or ``killed by SIGKILL``, from a Popen return code."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
