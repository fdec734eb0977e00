"""The admin API's JSON documents, built from the broker's in-memory state.

Plain functions of (state) -> dict, no I/O: every call is cheap enough for the event
loop (no disk work; sizes and offsets are what the storage already keeps in memory).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from kafkaproto import ApiKey, ErrorCode
from logserver.storage.api import PartitionStats

if TYPE_CHECKING:
    from logserver.admin.state import AdminState
    from logserver.broker import Broker


def api_name(api_key: int) -> str:
    """Kafka's request name (``Produce``, ``ApiVersions``) for an API key."""
    try:
        return "".join(part.capitalize() for part in ApiKey(api_key).name.split("_"))
    except ValueError:
        return f"Unknown{api_key}"


def cluster(broker: Broker) -> dict[str, Any]:
    host, port = broker.advertised_address
    return {
        "cluster_id": broker.cluster_id,
        "controller_id": broker.node_id,
        "brokers": [{"node_id": broker.node_id, "host": host, "port": port,
                     "listeners": [str(li) for li in broker.config["listeners"]]}],
    }


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


def topic(broker: Broker, name: str) -> dict[str, Any] | None:
    storage = broker.storage
    stats = storage.partition_stats(name)
    topic_id = storage.topic_id(name)
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


def topics(broker: Broker) -> dict[str, Any]:
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


def group_lags(broker: Broker) -> list[dict[str, Any]]:
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


def requests(state: AdminState) -> dict[str, Any]:
    stats = state.stats
    by_api = {api_name(key): {"count": h.count, "total_seconds": h.total}
              for key, h in sorted(stats.request_metrics.by_api.items())}
    return {"total": stats.requests, "protocol_errors": stats.protocol_errors, "apis": by_api}


def status(state: AdminState) -> dict[str, Any]:
    return {"ready": state.ready, "recovering": state.broker is None and not state.stopping,
            "stopping": state.stopping,
            "uptime_seconds": max(time.monotonic() - state.started_at, 0.0)}
