"""``logserver topic reassign`` and ``logserver topic reassignments``: move partition
replicas onto other brokers (AlterPartitionReassignments, 45) and show the moves under way
(ListPartitionReassignments, 46), the APIs of Kafka's ``kafka-reassign-partitions``, with
its ``--generate``, ``--execute --reassignment-json-file``, ``--verify`` and ``--throttle``
(throttle.py of the cluster applies it; reassign_plan.py has the pure parts)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import logserver.admin_cli.reassign_plan as reassign_plan
from kafkaproto import ApiKey
from kafkaproto.messages import (
    AlterPartitionReassignmentsRequest,
    IncrementalAlterConfigsRequest,
    ListPartitionReassignmentsRequest,
)
from kafkaproto.messages.admin_alter import OP_APPEND, OP_DELETE, OP_SET
from logserver.cluster.model import BrokerInfo

from .client import Cluster
from .errors import CliError, error_name, kafka_error
from .output import emit, table
from .reassign_plan import Plan, Where
from .reassign_progress import add_progress

TIMEOUT_MS = 30_000
RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4
RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
REPLICA_LISTS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
WAIT_POLL_S = 0.5
NOT_PLANNED_GRACE_S = 5.0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("reassign", parents=[common], help="move partition replicas to other brokers",
                       description="Move replicas (AlterPartitionReassignments): each MOVE is "
                       "TOPIC:PARTITION=BROKER,BROKER,... (the first broker is the preferred "
                       "leader), or the moves come from Kafka's reassignment JSON "
                       "(--reassignment-json-file). The new replicas catch up, then the old "
                       "ones leave. --generate proposes such a file; --verify tells whether "
                       "the moves are done and then removes their throttle.")
    p.add_argument("moves", nargs="*", metavar="MOVE")
    p.add_argument("--execute", action="store_true",
                   help="start the moves (the default when moves are given)")
    p.add_argument("--reassignment-json-file", metavar="FILE",
                   help="the moves in Kafka's reassignment JSON format")
    p.add_argument("--cancel", action="store_true",
                   help="cancel the moves under way of TOPIC:PARTITION (no =BROKERS)")
    p.add_argument("--throttle", type=int, metavar="BYTES_PER_SEC",
                   help="limit the moves' replication to this rate (leader and follower "
                   "side, every broker), until --verify (or --wait) sees them done")
    p.add_argument("--wait", action="store_true",
                   help="with --execute: wait until the moves are done, then remove the throttle")
    p.add_argument("--verify", action="store_true",
                   help="report each move (exit 0 once all are done as planned, else 1); "
                   "once none is under way, remove their throttle")
    p.add_argument("--generate", action="store_true",
                   help="print the current assignment of --topics and a proposed one over "
                   "--broker-list, as reassignment JSON")
    p.add_argument("--topics", metavar="T1,T2", help="with --generate: the topics to move")
    p.add_argument("--broker-list", metavar="B1,B2", help="with --generate: the brokers to use")
    p.set_defaults(func=reassign)
    p = sub.add_parser("reassignments", parents=[common], help="moves under way",
                       description="The reassignments under way (ListPartitionReassignments).")
    p.set_defaults(func=list_reassignments)


def _ints(text: str, what: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise CliError(f"bad {what} {text!r}: expected numbers separated by commas",
                       exit_code=2) from None


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
    if args.generate:
        return generate(cluster, args)
    if args.reassignment_json_file and args.moves:
        raise CliError("give the moves either as arguments or in --reassignment-json-file",
                       exit_code=2)
    if args.cancel:
        if args.reassignment_json_file:
            plan = reassign_plan.parse(_read(args.reassignment_json_file))
            wheres = sorted(plan)
        else:
            wheres = [(t, p) for t, p, _ in (_parse(m, True) for m in args.moves)]
        if not wheres:
            raise CliError("nothing to cancel: give TOPIC:PARTITION", exit_code=2)
        return _alter(cluster, args, {w: None for w in wheres}, "CANCELLED")
    plan = _plan(args)
    if args.verify:
        return verify(cluster, args, plan)
    if args.throttle is not None:
        if args.throttle < 1:
            raise CliError("--throttle must be at least 1 byte/s", exit_code=2)
        _set_throttle(cluster, plan, args.throttle)
    # --wait --json prints one document: the final state only.
    code = _alter(cluster, args, dict(plan), "STARTED", show=not (args.wait and args.json))
    if args.wait and code == 0:
        _wait(cluster, plan)
        return verify(cluster, args, plan, clear=args.throttle is not None)
    return code


def _read(path: str) -> str:
    try:
        return sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc}", exit_code=2) from None


def _plan(args: argparse.Namespace) -> Plan:
    if args.reassignment_json_file:
        return reassign_plan.parse(_read(args.reassignment_json_file))
    plan: Plan = {}
    for move in args.moves:
        topic, partition, replicas = _parse(move, False)
        assert replicas is not None
        plan[(topic, partition)] = replicas
    if not plan:
        raise CliError("no moves: give TOPIC:PARTITION=BROKERS, --reassignment-json-file "
                       "or --generate", exit_code=2)
    return plan


def _alter(cluster: Cluster, args: argparse.Namespace, moves: dict[Where, list[int] | None],
           started: str, *, show: bool = True) -> int:
    by_topic: dict[str, list[AlterPartitionReassignmentsRequest.ReassignablePartition]] = {}
    for (topic, partition), replicas in moves.items():
        by_topic.setdefault(topic, []).append(AlterPartitionReassignmentsRequest.ReassignablePartition(
            partition_index=partition, replicas=replicas))
    request = AlterPartitionReassignmentsRequest(timeout_ms=TIMEOUT_MS, topics=[
        AlterPartitionReassignmentsRequest.ReassignableTopic(name=t, partitions=ps)
        for t, ps in by_topic.items()])
    response = cluster.any().ask(ApiKey.ALTER_PARTITION_REASSIGNMENTS, request, ceiling=0)
    if response.error_code:
        raise kafka_error("reassign", response.error_code)
    rows = [{"topic": t.name, "partition": p.partition_index,
             "status": error_name(p.error_code) if p.error_code else started,
             "error": (p.error_message or error_name(p.error_code)) if p.error_code else None}
            for t in response.responses for p in t.partitions]
    if show:
        emit(args.json, rows, lambda rows: table(
            ["topic", "partition", "status"], [[r["topic"], r["partition"], r["status"]] for r in rows]))
    for r in rows:
        if r["error"]:
            print(f"logserver: reassign {r['topic']}:{r['partition']}: {r['status']} ({r['error']})",
                  file=sys.stderr)
    return 1 if any(r["error"] for r in rows) else 0


# ---- current assignment, --generate -----------------------------------------------------
def _current(cluster: Cluster, topics: list[str]) -> tuple[Plan, list[BrokerInfo]]:
    """The replicas of every partition of ``topics`` and the live brokers (with racks)."""
    metadata = cluster.metadata(topics)
    current: Plan = {}
    for t in metadata.topics:
        if t.error_code:
            raise kafka_error(f"topic {t.name!r}", t.error_code)
        for p in t.partitions:
            current[(t.name or "", p.partition_index)] = list(p.replica_nodes)
    brokers = [BrokerInfo(b.node_id, b.host, b.port, b.rack)
               for b in metadata.brokers]
    return current, brokers


def generate(cluster: Cluster, args: argparse.Namespace) -> int:
    if not args.topics or not args.broker_list:
        raise CliError("--generate needs --topics T1,T2 and --broker-list B1,B2", exit_code=2)
    topics = [t.strip() for t in args.topics.split(",") if t.strip()]
    wanted = _ints(args.broker_list, "--broker-list")
    current, live = _current(cluster, topics)
    known = {b.node_id: b for b in live}
    missing = [b for b in wanted if b not in known]
    if missing:
        raise CliError(f"brokers {missing} are not in the cluster (live: {sorted(known)})")
    proposed = reassign_plan.propose(current, [known[b] for b in wanted])
    doc = {"current": reassign_plan.render(current), "proposed": reassign_plan.render(proposed)}
    emit(args.json, doc, lambda d: "Current partition replica assignment\n"
         + json.dumps(d["current"]) + "\n\nProposed partition reassignment configuration\n"
         + json.dumps(d["proposed"]))
    return 0


# ---- --throttle, --verify ------------------------------------------------------------------
def _incremental(cluster: Cluster, resources: list[tuple[int, str, list[Any]]], what: str) -> None:
    request = IncrementalAlterConfigsRequest(resources=[
        IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=kind, resource_name=name, configs=configs)
        for kind, name, configs in resources if configs], validate_only=False)
    if not request.resources:
        return
    response = cluster.any().ask(ApiKey.INCREMENTAL_ALTER_CONFIGS, request, ceiling=1)
    for r in response.responses:
        if r.error_code:
            raise kafka_error(f"{what} ({r.resource_name or 'brokers'})", r.error_code,
                              r.error_message)


def _set_throttle(cluster: Cluster, plan: Plan, rate: int) -> None:
    """Kafka's --throttle: the replica lists on each moving topic (added to what is
    there), and both rates as the cluster-wide dynamic broker default."""
    Config = IncrementalAlterConfigsRequest.AlterableConfig
    current, _ = _current(cluster, sorted({t for t, _ in plan}))
    resources: list[tuple[int, str, list[Any]]] = []
    for topic, lists in reassign_plan.throttled_replicas(plan, current).items():
        resources.append((RESOURCE_TOPIC, topic, [
            Config(name=name, config_operation=OP_APPEND, value=",".join(entries))
            for name, entries in zip(REPLICA_LISTS, lists, strict=True) if entries]))
    resources.append((RESOURCE_BROKER, "", [
        Config(name=name, config_operation=OP_SET, value=str(rate)) for name in RATES]))
    _incremental(cluster, resources, "setting the throttle")
    print(f"logserver: replication throttled to {rate} bytes/s until the moves are done "
          "(reassign --verify removes it)", file=sys.stderr)


def _clear_throttle(cluster: Cluster, topics: list[str], others_moving: bool) -> None:
    Config = IncrementalAlterConfigsRequest.AlterableConfig
    resources: list[tuple[int, str, list[Any]]] = [
        (RESOURCE_TOPIC, topic, [Config(name=name, config_operation=OP_DELETE, value=None)
                                 for name in REPLICA_LISTS]) for topic in topics]
    if not others_moving:  # the rates stay while other moves may be throttled by them
        resources.append((RESOURCE_BROKER, "", [
            Config(name=name, config_operation=OP_DELETE, value=None) for name in RATES]))
    _incremental(cluster, resources, "removing the throttle")


def _statuses(cluster: Cluster, plan: Plan) -> tuple[list[dict[str, Any]], set[Where]]:
    """Each move: in progress, done (the replicas are the target) or not as planned (a
    cancelled or replaced move); and every partition moving in the cluster."""
    response = cluster.any().ask(ApiKey.LIST_PARTITION_REASSIGNMENTS,
                                  ListPartitionReassignmentsRequest(timeout_ms=TIMEOUT_MS, topics=None),
                                  ceiling=0)
    if response.error_code:
        raise kafka_error("reassignments", response.error_code)
    ongoing = {(t.name, p.partition_index) for t in response.topics for p in t.partitions}
    current, _ = _current(cluster, sorted({t for t, _ in plan}))
    rows = []
    for where, target in sorted(plan.items()):
        status = ("IN_PROGRESS" if where in ongoing
                  else "COMPLETE" if current.get(where) == list(target) else "NOT_AS_PLANNED")
        rows.append({"topic": where[0], "partition": where[1], "replicas": current.get(where),
                     "target": list(target), "status": status})
    return rows, ongoing


def _wait(cluster: Cluster, plan: Plan) -> None:
    """Until every move is complete. A move neither under way nor done (cancelled or
    replaced by someone else) ends the wait once it stays so for NOT_PLANNED_GRACE_S: right
    after the request the answering broker's own view may not show the move yet."""
    odd_since: float | None = None
    while True:
        statuses = {r["status"] for r in _statuses(cluster, plan)[0]}
        if statuses == {"COMPLETE"}:
            return
        if "IN_PROGRESS" in statuses:
            odd_since = None
        elif odd_since is None:
            odd_since = time.monotonic()
        elif time.monotonic() - odd_since > NOT_PLANNED_GRACE_S:
            return
        time.sleep(WAIT_POLL_S)


def verify(cluster: Cluster, args: argparse.Namespace, plan: Plan, *, clear: bool = True) -> int:
    """Kafka's --verify: each move's status (exit 1 while any is in progress); once none
    is, the throttle of their topics goes, and the rates too unless other moves are under
    way (with ``clear`` False, as ``--wait`` without ``--throttle``, configs stay)."""
    rows, ongoing = _statuses(cluster, plan)
    moving = any(r["status"] == "IN_PROGRESS" for r in rows)
    emit(args.json, rows, lambda rows: table(
        ["topic", "partition", "replicas", "target", "status"],
        [[r["topic"], r["partition"], r["replicas"], r["target"], r["status"]] for r in rows]))
    if moving:
        return 1
    if clear:
        _clear_throttle(cluster, sorted({t for t, _ in plan}), others_moving=bool(ongoing))
        print("logserver: no move under way: throttle removed", file=sys.stderr)
    return 0 if all(r["status"] == "COMPLETE" for r in rows) else 1


def list_reassignments(cluster: Cluster, args: argparse.Namespace) -> int:
    response = cluster.any().ask(ApiKey.LIST_PARTITION_REASSIGNMENTS,
                                  ListPartitionReassignmentsRequest(timeout_ms=TIMEOUT_MS, topics=None),
                                  ceiling=0)
    if response.error_code:
        raise kafka_error("reassignments", response.error_code)
    rows = [{"topic": t.name, "partition": p.partition_index, "replicas": list(p.replicas),
             "adding": list(p.adding_replicas), "removing": list(p.removing_replicas)}
            for t in response.topics for p in t.partitions]
    add_progress(cluster, rows)  # bytes moved of the total (reassign_progress.py)

    def progress(r: dict[str, Any]) -> str:
        share = 100 * r["moved_bytes"] / r["total_bytes"] if r["total_bytes"] else 100.0
        return f"{r['moved_bytes']}/{r['total_bytes']} ({share:.0f}%)"

    emit(args.json, rows, lambda rows: table(
        ["topic", "partition", "replicas", "adding", "removing", "bytes-moved"],
        [[r["topic"], r["partition"], r["replicas"], r["adding"], r["removing"], progress(r)]
         for r in rows]))
    return 0
