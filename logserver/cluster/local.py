"""``logserver cluster up``: N brokers and a local etcd on one machine, as one cluster.

The one-machine, many-core deployment: each broker is its own process (its own core),
all on 127.0.0.1 with consecutive ports, data under one directory; etcd is Debian's
``etcd`` binary with its data there too, unless ``--etcd-endpoints`` names a running
one. Runs in the foreground until SIGTERM or Ctrl-C, then stops the brokers (each
leaves the cluster cleanly) and etcd last, each by its pid (logserver.childproc).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import signal
import sys
import threading
from pathlib import Path

from logserver.childproc import HOST, ChildStartError, ListeningChild, python_path_env
from logserver.cluster.errors import etcd_client_missing
from logserver.cluster.local_joined import wait_until_joined
from mqtt_bridge import logs

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
    parser.add_argument("--etcd-port", type=int, default=2379, help="local etcd client port")
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


def broker_command(node: int, port: int, data: Path, etcd: str, nodes: int,
                   overrides: list[str], log_args: list[str] | None = None) -> list[str]:
    settings = {"node.id": str(node), "listeners": f"PLAINTEXT://{HOST}:{port}",
                "log.dirs": str(data), "cluster.etcd.endpoints": etcd,
                "default.replication.factor": str(min(3, nodes)),
                "min.insync.replicas": str(2 if nodes >= 3 else 1)}
    for item in overrides:
        name, _, value = item.partition("=")
        settings[name.strip()] = value
    command = [sys.executable, "-m", "logserver", *(log_args or [])]
    for name, value in settings.items():
        command += [f"--{name}", value]
    return command


def up(args: argparse.Namespace) -> int:
    if (missing := etcd_client_missing()) is not None:
        log.error("%s", missing)
        return 2
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
        for node in range(1, args.nodes + 1):
            port = args.base_port + node - 1
            broker = ListeningChild(root / f"node{node}.log", port, name=f"logserver node {node}",
                                    env=python_path_env(), argv=broker_command(
                                        node, port, root / f"node{node}", etcd_endpoints,
                                        args.nodes, args.override,
                                        ["--log-format", args.log_format,
                                         "--log-level", args.log_level]))
            children.append(broker)
            broker.spawn()  # all together: they agree on one cluster id through etcd
        brokers = [c for c in children if c is not etcd]
        for broker in brokers:  # a broker listens once it has joined (logserver/server.py)
            broker.wait_ready(BROKER_JOIN_TIMEOUT_S)
        addresses = {node: f"{HOST}:{args.base_port + node - 1}"
                     for node in range(1, args.nodes + 1)}
        cluster_id = wait_until_joined(addresses, children, BROKER_JOIN_TIMEOUT_S)
        log.info("cluster up: %d brokers joined cluster %s, bootstrap.servers=%s, etcd %s; "
                 "logs in %s; Ctrl-C or SIGTERM stops it", args.nodes, cluster_id,
                 ",".join(addresses.values()), etcd_endpoints, root)
        while not stop.wait(0.5):
            dead = [c for c in children if not c.running]
            if dead:
                log.error("%s exited (code %s); stopping the cluster", dead[0].name,
                          dead[0].returncode)
                return 1
        return 0
    except ChildStartError as exc:
        log.error("cannot start the cluster: %s", exc)
        return 1
    finally:
        # Brokers first, all at once (each moves its leaderships away: a controlled
        # shutdown can take a while on a busy machine), etcd last.
        brokers = [c for c in children if c is not etcd]
        for child in brokers:
            child.request_stop()
        for child in brokers:
            child.stop(BROKER_STOP_TIMEOUT_S)
        if etcd is not None:
            etcd.stop()
        log.info("cluster stopped")


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "up":
        print("usage: logserver cluster up [--nodes N] [--dir DIR] [--base-port PORT] "
              "[--etcd-port PORT | --etcd-endpoints HOST:PORT] [--override NAME=VALUE ...]",
              file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv[1:])
    logs.setup(args.log_level, args.log_format)  # the project's one log format
    return up(args)
