"""Several mqtt-bridge processes behind one port (SO_REUSEPORT), for the MQTT benchmark.

One bridge process tops out at one core. With ``--reuse-port`` N bridges listen on the
same port and the kernel spreads connections over them; each has its own ``--bridge-id``
(sessions move between them through the session topic's claim/release).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from helpers.mqtt_procs import BridgeProcess, SharedPortBridge  # noqa: E402  (tests/ on the path first)


def start_bridges(n: int, bootstrap: str, work: Path, *args: str,
                  env: Mapping[str, str] | None = None,
                  cwd: Path | None = None) -> list[BridgeProcess]:
    """``n`` bridge processes on one port (one plain process when ``n`` is 1), all started;
    ``env`` and ``cwd`` replace their environment and working directory (a compiled copy
    of the bridge first on ``sys.path``, say).

    On a failure the ones already started are stopped before the error propagates.
    """
    if n <= 1:
        only = BridgeProcess(bootstrap, work / "bridge.log", *args, env=env, cwd=cwd)
        only.start()
        return [only]
    started: list[BridgeProcess] = []
    try:
        port: int | None = None
        for i in range(n):
            b = SharedPortBridge(bootstrap, work / f"bridge-{i}.log", *args, "--reuse-port",
                                 "--bridge-id", f"bench-bridge-{i}", port=port, env=env, cwd=cwd)
            port = b.port
            b.start()
            started.append(b)
    except BaseException:
        for b in started:
            b.stop()
        raise
    return started
