"""``logserver cluster up``: N brokers and a local etcd on one machine, as one cluster.

The one-machine, many-core deployment: each broker is its own process (its own core),
all on 127.0.0.1 with consecutive ports (Kafka, admin API, REST Proxy), data under one
directory; etcd is Debian's ``etcd`` binary with its data there too, unless
``--etcd-endpoints`` names a running one. Every port is checked before anything starts.
"cluster up" is said once every broker has joined; a broker that dies later is reported
and restarted with backoff while the others serve on (local_supervisor.py). Runs in the
foreground until SIGTERM or Ctrl-C, then stops the brokers (each leaves the cluster
cleanly) and etcd last, each by its pid (commonlib.childproc).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

from commonlib import logs
from commonlib.childproc import (
    HOST,
    ChildProcess,
    ChildStartError,
    ListeningChild,
    port_free,
    python_path_env,
)
from logserver.cluster.errors import etcd_client_missing
from logserver.cluster.local_joined import StartInterrupted, seen_from, wait_until_joined
from logserver.cluster.local_supervisor import Supervisor

log = logging.getLogger(__name__)

# How long a broker gets after SIGTERM before SIGKILL (it first hands its leaderships to
# other brokers through etcd; 10 s was seen too short on a loaded machine).
BROKER_STOP_TIMEOUT_S = 60.0
# How long the brokers get to join (a restarted one first waits for its previous
# session in etcd to expire).
BROKER_JOIN_TIMEOUT_S = 60.0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="logserver cluster up",
        description="Start N broker processes and a local etcd as one cluster on this host.")
    parser.add_argument("--nodes", type=int, default=3, help="broker processes (default 3)")
    parser.add_argument("--dir", type=Path, default=Path("./cluster-data"),
                        help="data directory; node N uses DIR/nodeN, etcd DIR/etcd")
    parser.add_argument("--base-port", type=int, default=9092,
                        help="broker N listens on 127.0.0.1:BASE+N-1 (default 9092)")
    parser.add_argument("--admin-base-port", type=int, default=9644,
                        help="broker N serves its admin API (metrics, health) on "
                        "http://127.0.0.1:BASE+N-1 (default 9644; 0: none)")
    parser.add_argument("--rest-base-port", type=int, default=8082,
                        help="broker N serves the REST Proxy on 127.0.0.1:BASE+N-1 "
                        "(default 8082; 0: none)")
    parser.add_argument("--etcd-port", type=int, default=2379,
                        help="local etcd client port (its peer port is the next one)")
    parser.add_argument("--etcd-endpoints", default=None,
                        help="use this running etcd (host:port,...) instead of starting one")
    parser.add_argument("--override", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting for every broker (repeatable), e.g. "
                        "min.insync.replicas=2")
    parser.add_argument("--log-level", default="INFO", choices=logs.LEVELS,
                        help="verbosity of this command and of every broker (default INFO)")
    parser.add_argument("--log-format", default=logs.DEFAULT_FORMAT, choices=logs.FORMATS,
                        help="text or json lines, for this command's own lines and every "
                        f"broker's (default {logs.DEFAULT_FORMAT}), as `logserver --log-format`")
    return parser


def _nth(base: int, node: int) -> int | None:
    """Node ``node``'s port of a consecutive run from ``base`` (None: base 0, none)."""
    return base + node - 1 if base else None


def broker_command(node: int, port: int, data: Path, etcd: str, nodes: int,
                   overrides: list[str], log_args: list[str] | None = None, *,
                   admin_port: int | None = None, rest_port: int | None = None) -> list[str]:
    settings = {"node.id": str(node), "listeners": f"PLAINTEXT://{HOST}:{port}",
                "log.dirs": str(data), "cluster.etcd.endpoints": etcd,
                "admin.listeners": "" if admin_port is None else f"http://{HOST}:{admin_port}",
                "rest.proxy.listeners": "" if rest_port is None else f"http://{HOST}:{rest_port}",
                "default.replication.factor": str(min(3, nodes)),
                "min.insync.replicas": str(2 if nodes >= 3 else 1)}
    for item in overrides:
        name, _, value = item.partition("=")
        settings[name.strip()] = value
    command = [sys.executable, "-m", "logserver", *(log_args or [])]
    for name, value in settings.items():
        command += [f"--{name}", value]
    return command


def planned_ports(args: argparse.Namespace) -> list[tuple[int, str]]:
    """Every port this run will listen on, with what for."""
    ports: list[tuple[int, str]] = []
    if args.etcd_endpoints is None:
        ports += [(args.etcd_port, "etcd client"), (args.etcd_port + 1, "etcd peer")]
    for node in range(1, args.nodes + 1):
        ports.append((args.base_port + node - 1, f"node {node} Kafka listener"))
        for base, what in ((args.admin_base_port, "admin API"),
                           (args.rest_base_port, "REST Proxy")):
            if (port := _nth(base, node)) is not None:
                ports.append((port, f"node {node} {what}"))
    return ports


def ports_problem(args: argparse.Namespace) -> str | None:
    """One line naming the first port that is taken (or planned twice), else None."""
    seen: dict[int, str] = {}
    for port, what in planned_ports(args):
        if port in seen:
            return f"port {port} is planned for both {seen[port]} and {what}: " \
                   "choose other --base-port/--admin-base-port/--rest-base-port/--etcd-port"
        seen[port] = what
        if not 0 < port < 65536:
            return f"port {port} ({what}) is not a TCP port"
        if not port_free(port, reuse_address=True):
            return f"port {port} ({what}) is already in use on {HOST}: stop what holds " \
                   "it or choose other ports (--base-port, --admin-base-port, " \
                   "--rest-base-port, --etcd-port)"
    return None


def up(args: argparse.Namespace) -> int:
    if (missing := etcd_client_missing()) is not None:
        log.error("%s", missing)
        return 2
    if args.nodes < 1:
        log.error("--nodes must be at least 1")
        return 2
    if (problem := ports_problem(args)) is not None:
        log.error("cannot start the cluster: %s", problem)
        return 1
    root = args.dir.resolve()
    root.mkdir(parents=True, exist_ok=True)
    children: list[ListeningChild] = []
    etcd: ListeningChild | None = None
    etcd_endpoints = args.etcd_endpoints
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        if etcd_endpoints is None:
            binary = shutil.which("etcd")
            if binary is None:
                log.error("no etcd binary on PATH (Debian: apt-get install etcd-server)")
                return 1
            client = f"http://{HOST}:{args.etcd_port}"
            peer = f"http://{HOST}:{args.etcd_port + 1}"
            etcd = ListeningChild(root / "etcd.log", args.etcd_port, name="etcd", argv=[
                binary, "--name", "local", "--data-dir", str(root / "etcd"),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"local={peer}"])
            children.append(etcd)
            etcd.start()
            etcd_endpoints = f"{HOST}:{args.etcd_port}"
        addresses: dict[int, str] = {}
        brokers: dict[int, ListeningChild] = {}
        for node in range(1, args.nodes + 1):
            port = args.base_port + node - 1
            addresses[node] = f"{HOST}:{port}"
            broker = ListeningChild(root / f"node{node}.log", port, name=f"node {node}",
                                    env=python_path_env(), argv=broker_command(
                                        node, port, root / f"node{node}", etcd_endpoints,
                                        args.nodes, args.override,
                                        ["--log-format", args.log_format,
                                         "--log-level", args.log_level],
                                        admin_port=_nth(args.admin_base_port, node),
                                        rest_port=_nth(args.rest_base_port, node)))
            children.append(broker)
            brokers[node] = broker
            broker.spawn()  # all together: they agree on one cluster id through etcd
        # A broker listens once it has joined (logserver/server.py); "up" once every one
        # answers Metadata naming all of them (local_joined.py).
        cluster_id = wait_until_joined(addresses, children, BROKER_JOIN_TIMEOUT_S, stop.is_set)
        for node, address in addresses.items():
            admin_port = _nth(args.admin_base_port, node)
            log.info("node %d: Kafka %s, admin API %s, log %s", node, address,
                     "off" if admin_port is None else f"http://{HOST}:{admin_port}",
                     root / f"node{node}.log")
        log.info("cluster up: %d brokers joined cluster %s, bootstrap.servers=%s, etcd %s; "
                 "logs in %s; Ctrl-C or SIGTERM stops it", args.nodes, cluster_id,
                 ",".join(addresses.values()), etcd_endpoints, root)
        _supervise(children, brokers, addresses, stop)
        return 0
    except StartInterrupted:
        log.info("stopped before every broker had joined")
        return 0
    except ChildStartError as exc:
        log.error("cannot start the cluster: %s", exc)
        return 1
    finally:
        # Brokers first, all at once (each moves its leaderships away: a controlled
        # shutdown can take a while on a busy machine), etcd last.
        stopping = [c for c in children if c is not etcd]
        for child in stopping:
            child.request_stop()
        for child in stopping:
            child.stop(BROKER_STOP_TIMEOUT_S)
        if etcd is not None:
            etcd.stop()
        log.info("cluster stopped")


def _supervise(children: list[ListeningChild], brokers: dict[int, ListeningChild],
               addresses: dict[int, str], stop: threading.Event) -> None:
    """Until stopped: restart whatever dies (with backoff), and say when a restarted
    broker has joined again."""
    rejoining: dict[int, float] = {}  # node -> when it was restarted

    def restarted(child: ChildProcess) -> None:
        for node, broker in brokers.items():
            if broker is child:
                rejoining[node] = time.monotonic()

    supervisor = Supervisor(children, restarted)
    wanted = set(addresses)
    while not stop.wait(0.5):
        supervisor.poll()
        for node in list(rejoining):
            view = seen_from(addresses[node], timeout=1)
            if view is not None and view[0] == wanted:
                log.info("node %d rejoined the cluster (%.1f s after its restart)", node,
                         time.monotonic() - rejoining.pop(node))


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "up":
        build_parser().print_usage(sys.stderr)
        return 2
    args = build_parser().parse_args(argv[1:])
    logs.setup(args.log_level, args.log_format)  # the project's one log format
    return up(args)
