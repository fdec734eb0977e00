"""``logserver cluster health``: healthy or not and why, as ``rpk cluster health``.

Any Kafka cluster answers it: the partitions' replicas, leaders and ISR come from
Metadata, each topic's min.insync.replicas from DescribeConfigs, and a node is down when
it is named (as a broker or a replica) but does not answer on its advertised address.
The verdict is cluster/health.py's, the one the admin API's /v1/cluster/health gives.
"""

from __future__ import annotations

import argparse
from typing import Any

from kafkaproto import ApiKey
from kafkaproto.messages import DescribeConfigsRequest
from logserver.cluster.health import PartitionView, health

from .client import BrokerLink, Cluster
from .errors import CliError
from .output import cell, emit

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("health", parents=[common], help="healthy or not, and why",
                       description="Whether the cluster is healthy (rpk cluster health): the "
                       "controller, every node and those down, leaderless (offline), "
                       "under-replicated and under-min-ISR partitions.")
    p.set_defaults(func=cluster_health)


def _answers(cluster: Cluster, node_id: int) -> bool:
    try:
        cluster.node(node_id)
    except CliError:
        return False
    return True


def _min_isr(link: BrokerLink, topics: list[str], broker_id: int) -> dict[str, int]:
    """Each topic's min.insync.replicas (absent: the answering broker's)."""
    resources = [DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=RESOURCE_TOPIC, resource_name=t,
        configuration_keys=["min.insync.replicas"]) for t in topics]
    resources.append(DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=RESOURCE_BROKER, resource_name=str(broker_id),
        configuration_keys=["min.insync.replicas"]))
    response = link.ask(ApiKey.DESCRIBE_CONFIGS, DescribeConfigsRequest(
        resources=resources, include_synonyms=False, include_documentation=False), ceiling=4)
    found: dict[str, int] = {}
    for result in response.results:
        for config in result.configs or ():
            if config.name == "min.insync.replicas" and config.value is not None:
                key = "" if result.resource_type == RESOURCE_BROKER else result.resource_name
                found[key] = int(config.value)
    return found


def overview(cluster: Cluster) -> dict[str, Any]:
    metadata = cluster.metadata(None)
    named = {b.node_id for b in metadata.brokers}
    views = [PartitionView(t.name, p.partition_index, tuple(p.replica_nodes), p.leader_id,
                           tuple(p.isr_nodes))
             for t in metadata.topics if t.error_code == 0 and t.name
             for p in t.partitions]
    everyone = named | {r for v in views for r in v.replicas}
    live = {node for node in named if _answers(cluster, node)}
    link = cluster.any()
    answering = next((b.node_id for b in metadata.brokers
                      if (b.host, b.port) == (link.host, link.port)), min(live, default=0))
    configured = _min_isr(link, sorted({v.topic for v in views}), answering)
    default = configured.get("", 1)
    return health(live, everyone, metadata.controller_id, views,
                  lambda topic: configured.get(topic, default))


def cluster_health(cluster: Cluster, args: argparse.Namespace) -> int:
    data = overview(cluster)

    def listed(values: list[Any]) -> str:
        return "[" + " ".join(str(v) for v in values) + "]"

    def render(d: dict[str, Any]) -> str:
        rows = [("Healthy:", cell(d["is_healthy"])),
                ("Unhealthy reasons:", listed(d["unhealthy_reasons"])),
                ("Controller ID:", d["controller_id"]),
                ("All nodes:", listed(d["all_nodes"])),
                ("Nodes down:", listed(d["nodes_down"])),
                (f"Leaderless partitions ({d['leaderless_count']}):",
                 listed(d["leaderless_partitions"])),
                (f"Under-replicated partitions ({d['under_replicated_count']}):",
                 listed(d["under_replicated_partitions"])),
                (f"Under-min-ISR partitions ({d['under_min_isr_count']}):",
                 listed(d["under_min_isr_partitions"]))]
        width = max(len(k) for k, _ in rows)
        title = "CLUSTER HEALTH OVERVIEW"
        return "\n".join([title, "=" * len(title),
                          *(f"{k.ljust(width)}  {v}" for k, v in rows)])

    emit(args.json, data, render)
    return 0
