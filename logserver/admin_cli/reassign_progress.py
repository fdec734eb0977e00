"""How far the moves under way are, in bytes: what the adding replicas hold of what the
leader holds (DescribeLogDirs on each broker involved), as ``rpk cluster partitions
move-status`` shows a move's bytes moved and bytes left."""

from __future__ import annotations

from typing import Any

from kafkaproto import ApiKey
from kafkaproto.messages import DescribeLogDirsRequest

from .client import Cluster
from .errors import CliError

Where = tuple[str, int]


def _sizes(cluster: Cluster, node: int, wanted: list[Where]) -> dict[Where, int]:
    """Bytes of each wanted partition's log on broker ``node`` (absent: no log yet)."""
    topics: dict[str, list[int]] = {}
    for topic, partition in wanted:
        topics.setdefault(topic, []).append(partition)
    try:
        link = cluster.node(node)
    except CliError:
        return {}  # a broker that is down holds nothing we can count
    response = link.ask(ApiKey.DESCRIBE_LOG_DIRS, DescribeLogDirsRequest(topics=[
        DescribeLogDirsRequest.DescribableLogDirTopic(topic=t, partitions=ps)
        for t, ps in topics.items()]), ceiling=4)
    out: dict[Where, int] = {}
    for result in response.results:
        for t in result.topics:
            for p in t.partitions:
                if not p.is_future_key:
                    out[(t.name, p.partition_index)] = p.partition_size
    return out


def add_progress(cluster: Cluster, rows: list[dict[str, Any]]) -> None:
    """Set ``moved_bytes`` and ``total_bytes`` on each reassignment row: total is the
    leader's log size times the replicas being added; moved what those hold of it."""
    if not rows:
        return
    metadata = cluster.metadata(sorted({r["topic"] for r in rows}))
    leaders = {(t.name, p.partition_index): p.leader_id
               for t in metadata.topics for p in t.partitions}
    asked: dict[int, list[Where]] = {}
    for r in rows:
        where = (r["topic"], r["partition"])
        for node in {leaders.get(where, -1), *r["adding"]} - {-1}:
            asked.setdefault(node, []).append(where)
    sizes = {node: _sizes(cluster, node, wanted) for node, wanted in asked.items()}
    for r in rows:
        where = (r["topic"], r["partition"])
        full = sizes.get(leaders.get(where, -1), {}).get(where, 0)
        r["total_bytes"] = full * len(r["adding"])
        r["moved_bytes"] = sum(min(sizes.get(node, {}).get(where, 0), full)
                               for node in r["adding"])
