"""Reassignment plans, sans I/O: Kafka's reassignment JSON (what
``kafka-reassign-partitions --generate`` prints and ``--execute
--reassignment-json-file`` reads), the ``--generate`` planner, and the throttled-replica
lists a throttled move sets on its topics.

The JSON: ``{"version": 1, "partitions": [{"topic": T, "partition": P, "replicas": [B,
...], "log_dirs": ["any", ...]}]}``; ``log_dirs`` may be left out, and only ``any`` is
accepted (a broker here has one data directory).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from logserver.cluster.model import BrokerInfo, rack_alternated

from .errors import CliError

Where = tuple[str, int]
Plan = dict[Where, list[int]]  # (topic, partition) -> replicas, preferred leader first


def render(plan: Mapping[Where, Sequence[int]]) -> dict[str, Any]:
    """The plan as Kafka's reassignment JSON document."""
    return {"version": 1, "partitions": [
        {"topic": topic, "partition": index, "replicas": list(replicas),
         "log_dirs": ["any"] * len(replicas)}
        for (topic, index), replicas in sorted(plan.items())]}


def parse(text: str) -> Plan:
    """A reassignment JSON document; CliError (exit 2) saying what is wrong."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise CliError(f"the reassignment file is not JSON: {exc}", exit_code=2) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise CliError('the reassignment file needs {"version": 1, "partitions": [...]}', exit_code=2)
    if doc.get("version", 1) != 1:
        raise CliError(f"unsupported reassignment file version {doc.get('version')!r}", exit_code=2)
    plan: Plan = {}
    for entry in doc["partitions"]:
        try:
            topic, index, replicas = entry["topic"], entry["partition"], entry["replicas"]
            ok = (isinstance(topic, str) and topic and isinstance(index, int)
                  and isinstance(replicas, list) and replicas
                  and all(isinstance(b, int) for b in replicas))
        except (KeyError, TypeError):
            ok = False
        if not ok:
            raise CliError(f"bad partition entry {entry!r}: needs topic, partition and replicas",
                           exit_code=2)
        dirs = entry.get("log_dirs")
        if dirs is not None and any(d != "any" for d in dirs):
            raise CliError(f"{topic}:{index}: log_dirs other than \"any\" are not supported "
                           "(one data directory per broker)", exit_code=2)
        if (topic, index) in plan:
            raise CliError(f"{topic}:{index} is listed twice", exit_code=2)
        if len(set(replicas)) != len(replicas):
            raise CliError(f"{topic}:{index}: a broker is listed twice in {replicas}", exit_code=2)
        plan[(topic, index)] = list(replicas)
    if not plan:
        raise CliError("the reassignment file lists no partitions", exit_code=2)
    return plan


def propose(current: Mapping[Where, Sequence[int]], brokers: Iterable[BrokerInfo]) -> Plan:
    """Every partition of ``current`` placed on ``brokers`` with its replication factor,
    over all topics together: first the preferred leaders go round the rack-alternated
    broker order (so they end within one of even), then each further replica goes to a
    broker on a rack the partition does not use yet (when racks are set) with the fewest
    replicas so far, ties going round the same order. So replicas end even where the
    replication factors allow it."""
    chosen = list(brokers)
    order = rack_alternated(chosen)
    rack = {b.node_id: b.rack for b in chosen}
    wheres = sorted(current)
    for where in wheres:
        if len(current[where]) > len(order):
            raise CliError(f"{where[0]}:{where[1]}: replication factor {len(current[where])} "
                           f"is larger than the {len(order)} brokers listed", exit_code=2)
    plan: Plan = {where: [order[k % len(order)]] for k, where in enumerate(wheres)}
    held: Counter[int] = Counter(picked[0] for picked in plan.values())
    for k, where in enumerate(wheres):
        picked = plan[where]
        turn = order[k % len(order):] + order[:k % len(order)]
        while len(picked) < len(current[where]):
            racks_used = {rack[b] for b in picked if rack[b] is not None}
            best = min((b for b in turn if b not in picked),
                       key=lambda b: (rack[b] in racks_used, held[b]))
            picked.append(best)
            held[best] += 1
    return plan


def throttled_replicas(plan: Mapping[Where, Sequence[int]], current: Mapping[Where, Sequence[int]]
                       ) -> dict[str, tuple[list[str], list[str]]]:
    """Per topic the leader and follower throttled-replica entries of a move, as Kafka's
    tool sets them: every replica the partition has now may send (``P:B`` in
    ``leader.replication.throttled.replicas``), every replica it gains receives
    (``follower.replication.throttled.replicas``). Partitions that do not move are left
    out."""
    out: dict[str, tuple[list[str], list[str]]] = {}
    for (topic, index), target in sorted(plan.items()):
        now = list(current.get((topic, index), ()))
        if list(target) == now:
            continue
        leaders, followers = out.setdefault(topic, ([], []))
        leaders += [f"{index}:{b}" for b in now]
        followers += [f"{index}:{b}" for b in target if b not in now]
    return out
