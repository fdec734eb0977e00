"""``logserver cluster info``: the cluster id, the controller, the brokers (Metadata);
``cluster health`` is in cluster_health.py."""

from __future__ import annotations

import argparse
from typing import Any

from .client import Cluster
from .cluster_health import register as register_health
from .output import emit, key_values, table


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    cluster = commands.add_parser("cluster", help="the cluster and its brokers",
                                  description="The cluster: its id, controller and brokers.")
    sub = cluster.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = sub.add_parser("info", parents=[common], help="cluster id, controller, brokers, topics",
                       description="Cluster id, controller, brokers and the topic count.")
    p.set_defaults(func=info)
    register_health(sub, common)


def info(cluster: Cluster, args: argparse.Namespace) -> int:
    metadata = cluster.metadata(None)
    link = cluster.any()
    data = {
        "cluster_id": metadata.cluster_id,
        "controller": metadata.controller_id,
        "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                    for b in sorted(metadata.brokers, key=lambda b: b.node_id)],
        "topics": sum(1 for t in metadata.topics if t.error_code == 0 and not t.is_internal),
        "bootstrap": link.address,
    }

    def render(d: dict[str, Any]) -> str:
        head = key_values([("cluster", d["cluster_id"]), ("controller", d["controller"]),
                           ("topics", d["topics"])])
        brokers = table(["id", "host", "port", "rack"],
                        [[b["node_id"], b["host"], b["port"], b["rack"]] for b in d["brokers"]])
        return f"{head}\n\nBROKERS\n=======\n{brokers}"

    emit(args.json, data, render)
    return 0
