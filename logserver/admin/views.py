"""The admin API's JSON documents, built from the broker's in-memory state.

Plain functions of (state) -> dict, no I/O: every call is cheap enough for the event
loop (no disk work; sizes and offsets are what the storage already keeps in memory).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from kafkaproto import ApiKey, ErrorCode
from logserver.cluster.health import PartitionView, health
from logserver.storage.api import PartitionStats
from logserver.topic_config import min_insync_replicas

if TYPE_CHECKING:
    from logserver.admin.rates import RecentRates
    from logserver.admin.state import AdminState
    from logserver.cluster_access import WithCluster


def api_name(api_key: int) -> str:
    """Kafka's request name (``Produce``, ``ApiVersions``) for an API key."""
    try:
        return "".join(part.capitalize() for part in ApiKey(api_key).name.split("_"))
    except ValueError:
        return f"Unknown{api_key}"


def cluster(broker: WithCluster) -> dict[str, Any]:
    """This broker alone, or in cluster mode every registered broker and the controller
    (-1 while none is elected), as this broker's view of etcd has them. Listeners are
    known for this broker only."""
    host, port = broker.advertised_address
    own = [str(li) for li in broker.config["listeners"]]
    if broker.cluster is not None:
        model = broker.cluster.model
        return {
            "cluster_id": model.cluster_id or broker.cluster_id,
            "controller_id": -1 if model.controller_id is None else model.controller_id,
            "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port,
                         "listeners": own if b.node_id == broker.node_id else []}
                        for b in sorted(model.brokers.values(), key=lambda b: b.node_id)],
        }
    return {
        "cluster_id": broker.cluster_id,
        "controller_id": broker.node_id,
        "brokers": [{"node_id": broker.node_id, "host": host, "port": port,
                     "listeners": own}],
    }


def cluster_health(broker: WithCluster) -> dict[str, Any]:
    """rpk's health overview (cluster/health.py) from this broker's view of etcd: alive
    are the registered brokers; every node is those and every replica named anywhere. A
    single broker is its own healthy cluster."""
    if broker.cluster is None:
        return health([broker.node_id], [broker.node_id], broker.node_id, [], lambda _: 1)
    node = broker.cluster
    model = node.model
    live = set(model.brokers) | {broker.node_id}
    views = [PartitionView(topic, index, v.state.replicas, v.state.leader, v.state.isr)
             for (topic, index), v in list(model.partitions.items())]
    replicas = {r for v in views for r in v.replicas}

    def min_isr(topic: str) -> int:
        record = model.topics.get(topic)
        return min_insync_replicas(None if record is None else record.configs, node.min_isr)

    return health(live, live | replicas, model.controller_id, views, min_isr)


def _partition(stats: PartitionStats, leader: int) -> dict[str, Any]:
    return {
        "partition": stats.partition,
        "leader": leader,
        "log_start_offset": stats.log_start_offset,
        "log_end_offset": stats.log_end_offset,
        "high_watermark": stats.high_watermark,
        "segment_count": stats.segment_count,
        "size_bytes": stats.size_bytes,
        "bytes_in": stats.bytes_in,
        "messages_in": stats.messages_in,
        "bytes_out": stats.bytes_out,
    }


def topic(broker: WithCluster, name: str) -> dict[str, Any] | None:
    storage = broker.storage
    stats = storage.partition_stats(name)
    topic_id = broker.topics.topic_id(name)  # the cluster's id in cluster mode, as Metadata
    if stats is None or topic_id is None:
        return None
    partitions = [_partition(s, broker.node_id) for s in stats]
    return {
        "name": name,
        "topic_id": topic_id.hex(),
        "internal": name.startswith("__"),
        "partitions": partitions,
        "configs": dict(storage.topic_overrides(name) or {}),
    }


def topics(broker: WithCluster) -> dict[str, Any]:
    listed = []
    for name in broker.storage.topic_names():
        stats = broker.storage.partition_stats(name)
        if stats is None:
            continue  # deleted since the names were taken
        listed.append({
            "name": name,
            "internal": name.startswith("__"),
            "partitions": len(stats),
            "size_bytes": sum(s.size_bytes for s in stats),
            "messages": sum(s.log_end_offset - s.log_start_offset for s in stats),
            "bytes_in": sum(s.bytes_in for s in stats),
            "bytes_out": sum(s.bytes_out for s in stats),
        })
    return {"topics": listed}


def group_lags(broker: WithCluster) -> list[dict[str, Any]]:
    """Every group with its committed offsets and lag (high watermark - committed)."""
    coordinator = broker.groups
    _, listed = coordinator.list_groups(())
    groups = []
    for group_id, protocol_type, state in sorted(listed):
        error, fetched = coordinator.fetch_offsets(group_id, None, False)
        partitions: list[dict[str, Any]] = []
        if error == ErrorCode.NONE:
            for topic_name, partition, offset, _epoch, _meta, part_error in sorted(fetched):
                if part_error != ErrorCode.NONE or offset < 0:
                    continue
                hw = broker.storage.high_watermark(topic_name, partition)
                partitions.append({
                    "topic": topic_name, "partition": partition, "committed_offset": offset,
                    "high_watermark": -1 if hw is None else hw,
                    "lag": 0 if hw is None else max(hw - offset, 0),
                })
        groups.append({
            "group_id": group_id,
            "protocol_type": protocol_type,
            "state": state,
            "members": coordinator.member_count(group_id),
            "lag": sum(p["lag"] for p in partitions),
            "partitions": partitions,
        })
    return groups


def connections(state: AdminState) -> dict[str, Any]:
    now = time.monotonic()
    listed: list[dict[str, Any]] = [{"peer": c.peer, "idle_ms": int((now - c.last_active) * 1000),
               "in_flight": c.in_flight} for c in list(state.stats.connections)]
    listed.sort(key=lambda c: c["peer"])
    return {"open": state.stats.open_connections, "connections": listed}


def request_counts(state: AdminState) -> dict[str, int]:
    """Requests answered so far, by Kafka's API name."""
    return {api_name(key): h.count for key, h in state.stats.request_metrics.by_api.items()}


def requests(state: AdminState, recent: RecentRates | None = None) -> dict[str, Any]:
    """Totals per API, the requests waiting now (delayed), and the recent rates."""
    stats = state.stats
    metrics = stats.request_metrics
    rates = recent.rates() if recent is not None else {}
    by_api = {}
    for key in sorted({*metrics.by_api, *(k for k, n in metrics.waiting.items() if n)}):
        name = api_name(key)
        windows = rates.get(name, {})
        h = metrics.by_api.get(key)
        by_api[name] = {"count": 0 if h is None else h.count,
                        "total_seconds": 0.0 if h is None else h.total,
                        "waiting": metrics.waiting.get(key, 0),
                        "per_second_10s": windows.get(10, 0.0),
                        "per_second_1m": windows.get(60, 0.0)}
    return {"total": stats.requests, "protocol_errors": stats.protocol_errors, "apis": by_api}


def status(state: AdminState) -> dict[str, Any]:
    return {"ready": state.ready, "recovering": state.broker is None and not state.stopping,
            "stopping": state.stopping,
            "uptime_seconds": max(time.monotonic() - state.started_at, 0.0)}
