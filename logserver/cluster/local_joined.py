"""When ``logserver cluster up`` may say the cluster is up: every broker has joined.

Joined as clients see it: each broker answers Metadata itself (a broker opens its
listeners only once it has joined, logserver/server.py), lists every broker of the
cluster, and names the same cluster id as the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from commonlib.childproc import ChildProcess, ChildStartError
from logserver.admin_cli.client import Cluster
from logserver.admin_cli.errors import CliError
from logserver.cluster.local_supervisor import start_error_line

POLL_S = 0.2


def seen_from(address: str, timeout: float = 5) -> tuple[set[int], str | None] | None:
    """The broker ids and cluster id one broker's own Metadata answer names; None if it
    does not answer (not listening yet)."""
    client = Cluster(address, timeout=timeout)
    try:
        metadata = client.metadata([])
    except CliError:
        return None
    finally:
        client.close()
    return {b.node_id for b in metadata.brokers}, metadata.cluster_id


class StartInterrupted(Exception):
    """Stopped (Ctrl-C, SIGTERM) before every broker had joined."""


def wait_until_joined(addresses: Mapping[int, str], children: Sequence[ChildProcess],
                      timeout: float, stopped: Callable[[], bool] = lambda: False) -> str:
    """The cluster id, once the broker at ``addresses[node]`` of every node answers with
    all of them and one cluster id; ChildStartError if a child exits or time runs out,
    StartInterrupted once ``stopped()`` says so."""
    wanted = set(addresses)
    deadline = time.monotonic() + timeout
    views: dict[int, tuple[set[int], str | None] | None] = {}
    while True:
        if stopped():
            raise StartInterrupted()
        dead = next((c for c in children if not c.running), None)
        if dead is not None:
            raise ChildStartError(f"{dead.name} exited with code {dead.returncode}: "
                                  f"{start_error_line(dead.output())}")
        views = {node: seen_from(address) for node, address in addresses.items()}
        ids = {view[1] for view in views.values() if view is not None}
        if all(view is not None and view[0] == wanted for view in views.values()) \
                and len(ids) == 1 and None not in ids:
            cluster_id = ids.pop()
            assert cluster_id is not None
            return cluster_id
        if time.monotonic() > deadline:
            described = "; ".join(
                f"node {node}: " + ("no answer" if view is None else
                                    f"brokers {sorted(view[0])}, cluster id {view[1]}")
                for node, view in sorted(views.items()))
            raise ChildStartError(f"the brokers did not all join within {timeout:.0f} s "
                                  f"({described})")
        time.sleep(POLL_S)
