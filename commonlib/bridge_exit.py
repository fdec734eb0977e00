"""The mqtt-bridge program's exit codes that its supervisor acts on.

``logserver --mqtt-bridge`` runs the bridge as a separate program (logserver/bridge_process.py)
and learns how it ended only from its exit code. These two say a restart cannot help, so
the supervisor gives up instead of retrying; every other end is a death it restarts.
"""

from __future__ import annotations

EXIT_USAGE = 2  # argparse's own code for bad arguments
EXIT_CANNOT_LISTEN = 3  # the MQTT port cannot be bound: a supervisor must not retry
