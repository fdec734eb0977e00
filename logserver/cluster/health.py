"""Cluster health, as ``rpk cluster health`` and Redpanda's health overview tell it.

Pure: given who is alive, who the controller is and every partition's replicas, leader
and ISR, say whether the cluster is healthy and why not. The admin API's
``/v1/cluster/health`` feeds it from the broker's view of etcd (views.py); ``logserver
cluster health`` from Metadata, DescribeConfigs and which brokers answer (any Kafka).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

NO_LEADER = -1


@dataclass(frozen=True)
class PartitionView:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int
    isr: tuple[int, ...]


def health(live: Iterable[int], all_nodes: Iterable[int], controller_id: int | None,
           partitions: Iterable[PartitionView], min_isr: Callable[[str], int]) -> dict[str, Any]:
    """The health overview: ``is_healthy`` and ``unhealthy_reasons``, the controller (-1:
    none), every node and the ones down, and the partitions that are leaderless (offline:
    no live leader), under-replicated (ISR smaller than the replicas) or under their
    topic's min.insync.replicas (acks=all writes fail), each as ``topic/partition``."""
    up = set(live)
    nodes = sorted(set(all_nodes) | up)
    down = [n for n in nodes if n not in up]
    leaderless: list[str] = []
    under_replicated: list[str] = []
    under_min_isr: list[str] = []
    for p in sorted(partitions, key=lambda p: (p.topic, p.partition)):
        name = f"{p.topic}/{p.partition}"
        if p.leader == NO_LEADER or p.leader not in up:
            leaderless.append(name)
        if len(p.isr) < len(p.replicas):
            under_replicated.append(name)
        # Kafka's effective min ISR: never more than the replicas (an RF=1 topic is
        # not under a broker-wide min.insync.replicas=2).
        if len(p.isr) < min(min_isr(p.topic), len(p.replicas)):
            under_min_isr.append(name)
    reasons = [reason for reason, present in (
        ("no_elected_controller", controller_id is None or controller_id == NO_LEADER),
        ("nodes_down", down), ("leaderless_partitions", leaderless),
        ("under_replicated_partitions", under_replicated),
        ("under_min_isr_partitions", under_min_isr)) if present]
    return {
        "is_healthy": not reasons,
        "unhealthy_reasons": reasons,
        "controller_id": NO_LEADER if controller_id is None else controller_id,
        "all_nodes": nodes,
        "nodes_down": down,
        "leaderless_partitions": leaderless,
        "leaderless_count": len(leaderless),
        "under_replicated_partitions": under_replicated,
        "under_replicated_count": len(under_replicated),
        "under_min_isr_partitions": under_min_isr,
        "under_min_isr_count": len(under_min_isr),
    }
