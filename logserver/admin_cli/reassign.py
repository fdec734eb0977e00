"""``logserver topic reassign`` and ``logserver topic reassignments``: move partition
replicas onto other brokers (AlterPartitionReassignments, 45) and show the moves under way
(ListPartitionReassignments, 46), the APIs of Kafka's ``kafka-reassign-partitions``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kafkaproto import ApiKey
from kafkaproto.messages import (
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
)

from .client import Cluster
from .errors import CliError, error_name, kafka_error
from .output import emit, table

TIMEOUT_MS = 30_000


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("reassign", parents=[common], help="move partition replicas to other brokers",
                       description="Move replicas (AlterPartitionReassignments): each MOVE is "
                       "TOPIC:PARTITION=BROKER,BROKER,... (the first broker is the preferred "
                       "leader). The new replicas catch up, then the old ones leave.")
    p.add_argument("moves", nargs="+", metavar="MOVE")
    p.add_argument("--cancel", action="store_true",
                   help="cancel the moves under way of TOPIC:PARTITION (no =BROKERS)")
    p.set_defaults(func=reassign)
    p = sub.add_parser("reassignments", parents=[common], help="moves under way",
                       description="The reassignments under way (ListPartitionReassignments).")
    p.set_defaults(func=list_reassignments)


def _parse(move: str, cancel: bool) -> tuple[str, int, list[int] | None]:
    where, _, brokers = move.partition("=")
    topic, _, index = where.rpartition(":")
    try:
        partition = int(index)
        replicas = None if cancel else [int(b) for b in brokers.split(",")]
    except ValueError:
        raise CliError(f"bad move {move!r}: expected TOPIC:PARTITION=BROKER,BROKER,...",
                       exit_code=2) from None
    if not topic or (cancel and brokers):
        raise CliError(f"bad move {move!r}", exit_code=2)
    return topic, partition, replicas


def reassign(cluster: Cluster, args: argparse.Namespace) -> int:
    by_topic: dict[str, list[AlterPartitionReassignmentsRequest.ReassignablePartition]] = {}
    for move in args.moves:
        topic, partition, replicas = _parse(move, args.cancel)
        by_topic.setdefault(topic, []).append(AlterPartitionReassignmentsRequest.ReassignablePartition(
            partition_index=partition, replicas=replicas))
    request = AlterPartitionReassignmentsRequest(timeout_ms=TIMEOUT_MS, topics=[
        AlterPartitionReassignmentsRequest.ReassignableTopic(name=t, partitions=ps)
        for t, ps in by_topic.items()])
    response = cluster.any().call(ApiKey.ALTER_PARTITION_REASSIGNMENTS, request, ceiling=0)
    if response.error_code:
        raise kafka_error("reassign", response.error_code)
    rows = [{"topic": t.name, "partition": p.partition_index,
             "status": error_name(p.error_code) if p.error_code
             else "CANCELLED" if args.cancel else "STARTED",
             "error": (p.error_message or error_name(p.error_code)) if p.error_code else None}
            for t in response.responses for p in t.partitions]
    emit(args.json, rows, lambda rows: table(
        ["topic", "partition", "status"], [[r["topic"], r["partition"], r["status"]] for r in rows]))
    for r in rows:
        if r["error"]:
            print(f"logserver: reassign {r['topic']}:{r['partition']}: {r['status']} ({r['error']})",
                  file=sys.stderr)
    return 1 if any(r["error"] for r in rows) else 0


def list_reassignments(cluster: Cluster, args: argparse.Namespace) -> int:
    response = cluster.any().call(ApiKey.LIST_PARTITION_REASSIGNMENTS,
                                  ListPartitionReassignmentsRequest(timeout_ms=TIMEOUT_MS, topics=None),
                                  ceiling=0)
    if response.error_code:
        raise kafka_error("reassignments", response.error_code)
    rows = [{"topic": t.name, "partition": p.partition_index, "replicas": list(p.replicas),
             "adding": list(p.adding_replicas), "removing": list(p.removing_replicas)}
            for t in response.topics for p in t.partitions]
    emit(args.json, rows, lambda rows: table(
        ["topic", "partition", "replicas", "adding", "removing"],
        [[r["topic"], r["partition"], r["replicas"], r["adding"], r["removing"]] for r in rows]))
    return 0
