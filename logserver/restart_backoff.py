"""When to restart a supervised child that died: exponential backoff with jitter, capped, reset
after a long enough run. Shared by the ``--mqtt-bridge`` supervisor
(logserver/bridge_process.py) and ``logserver cluster up`` (logserver/cluster/local.py),
so a crash loop slows down the same way everywhere."""

from __future__ import annotations

import signal

from kafkaproto.client import Backoff, Failures

FIRST_BACKOFF_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 30.0
#: A child that ran this long before dying starts over at the first backoff.
STABLE_RUN_SECONDS = 60.0


class RestartBackoff:
    """The delay before each restart of one child: the project's one Backoff (doubling
    per quick death, with jitter, up to a cap), started over after a stable run."""

    def __init__(self, first: float = FIRST_BACKOFF_SECONDS,
                 maximum: float = MAX_BACKOFF_SECONDS,
                 stable_run: float = STABLE_RUN_SECONDS) -> None:
        self.stable_run = stable_run
        self._deaths = Failures(Backoff.seconds(first, maximum))

    def after_death(self, ran_for: float) -> float:
        """The delay before restarting a child that died after running ``ran_for`` s."""
        if ran_for >= self.stable_run:
            self._deaths.succeeded()
        return self._deaths.failed()


def describe_exit(code: int) -> str:
    """``exit code 1`` or ``killed by SIGKILL``, from a Popen return code."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
