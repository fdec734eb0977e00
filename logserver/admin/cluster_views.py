"""Cluster-wide admin views: every broker with its state, every group with its lag
whichever broker coordinates it, every partition's health and offsets from its leader,
and the message rate per topic summed over the leaders.

A single broker answers from memory (``views``); in cluster mode the brokers are asked
over the Kafka protocol (``peers``), as an AdminClient would: ListGroups to every live
broker (each lists the groups it coordinates), DescribeGroups and OffsetFetch to that
coordinator, ListOffsets to each partition's leader. The brokers come from the cluster
membership in etcd; a broker that holds replicas or was seen before but has no session
now is listed as ``down``, never dropped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import (
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from logserver.admin import peers, views

if TYPE_CHECKING:
    from logserver.cluster_access import WithCluster

log = logging.getLogger(__name__)

LATEST, EARLIEST = -1, -2  # ListOffsets timestamps
LIST_OFFSETS_VERSION = 7
RATE_WINDOW_S = 10.0

Where = tuple[str, int]


class BrokerRoster:
    """The brokers this admin listener has seen registered, so one that lost its session
    is still shown (as down) with its address."""

    def __init__(self) -> None:
        self.seen: dict[int, tuple[str, int]] = {}

    def brokers(self, broker: WithCluster) -> list[dict[str, Any]]:
        summary = views.cluster(broker)
        live = {b["node_id"]: b for b in summary["brokers"]}
        for node, b in live.items():
            self.seen[node] = (b["host"], b["port"])
        known = set(live) | set(self.seen)
        cluster = broker.cluster
        if cluster is not None:
            for node, info in cluster.known_brokers.ever.items():
                self.seen.setdefault(node, (info.host, info.port))
            known.update(self.seen)
            for versioned in cluster.model.partitions.values():
                known.update(versioned.state.replicas)
        rows = []
        for node in sorted(known):
            host, port = self.seen.get(node, ("", -1))
            rows.append({"node_id": node, "host": host, "port": port,
                         "listeners": live[node]["listeners"] if node in live else [],
                         "state": "alive" if node in live else "down",
                         "controller": node == summary["controller_id"]})
        return rows

    def cluster(self, broker: WithCluster) -> dict[str, Any]:
        summary = views.cluster(broker)
        brokers = self.brokers(broker)
        return {**summary, "brokers": brokers,
                "mode": "single" if broker.cluster is None else "cluster"}


def layout(broker: WithCluster) -> list[dict[str, Any]]:
    """Every partition: leader, replicas, ISR, and whether it is offline (no live
    leader) or under-replicated (an ISR smaller than its replicas)."""
    cluster = broker.cluster
    rows = []
    if cluster is None:
        for topic in broker.storage.topic_names():
            for s in broker.storage.partition_stats(topic) or ():
                rows.append({"topic": topic, "partition": s.partition, "leader": broker.node_id,
                             "replicas": [broker.node_id], "isr": [broker.node_id],
                             "offline_replicas": [], "offline": False,
                             "under_replicated": False})
        return sorted(rows, key=lambda r: (r["topic"], r["partition"]))
    live = set(cluster.model.brokers) | {broker.node_id}
    for (topic, index), versioned in sorted(cluster.model.partitions.items()):
        state = versioned.state
        rows.append({"topic": topic, "partition": index, "leader": state.leader,
                     "replicas": list(state.replicas), "isr": list(state.isr),
                     "offline_replicas": state.offline_replicas(live),
                     "offline": state.leader not in live,
                     "under_replicated": len(state.isr) < len(state.replicas)})
    return rows


async def _leader_offsets(broker: WithCluster, address: peers.Address, wanted: list[Where]
                          ) -> dict[Where, tuple[int, int]]:
    """(log start offset, high watermark) of the partitions this leader holds."""
    def request(timestamp: int) -> peers.Request:
        topics: dict[str, list[int]] = {}
        for topic, index in wanted:
            topics.setdefault(topic, []).append(index)
        return (ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, ListOffsetsRequest(
            replica_id=-1, isolation_level=0, topics=[
                ListOffsetsRequest.ListOffsetsTopic(name=name, partitions=[
                    ListOffsetsRequest.ListOffsetsPartition(
                        partition_index=p, current_leader_epoch=-1, timestamp=timestamp)
                    for p in indexes]) for name, indexes in topics.items()]))
    earliest, latest = await peers.ask(broker, address, [request(EARLIEST), request(LATEST)])
    starts = _offsets(earliest)
    return {where: (starts[where], hw) for where, hw in _offsets(latest).items()
            if where in starts}


def _offsets(response: Any) -> dict[Where, int]:
    assert isinstance(response, ListOffsetsResponse)
    return {(t.name, p.partition_index): p.offset for t in response.topics
            for p in t.partitions if p.error_code == ErrorCode.NONE}


async def partition_offsets(broker: WithCluster, partitions: Iterable[dict[str, Any]]
                            ) -> dict[Where, tuple[int, int]]:
    """(log start, high watermark) per partition, each from its leader; the ones whose
    leader is down or did not answer are missing."""
    if broker.cluster is None:
        out = {}
        for topic in broker.storage.topic_names():
            for s in broker.storage.partition_stats(topic) or ():
                out[(topic, s.partition)] = (s.log_start_offset, s.high_watermark)
        return out
    addresses = peers.live_addresses(broker)
    by_leader: dict[int, list[Where]] = {}
    for row in partitions:
        if row["leader"] in addresses:
            by_leader.setdefault(row["leader"], []).append((row["topic"], row["partition"]))
    answers = await asyncio.gather(*(_leader_offsets(broker, addresses[leader], wanted)
                                     for leader, wanted in by_leader.items()),
                                   return_exceptions=True)
    out = {}
    for answer in answers:
        if isinstance(answer, dict):
            out.update(answer)
        elif not isinstance(answer, peers.PeerUnreachable):
            log.warning("admin view: offsets not read: %r", answer)
    return out


async def _coordinated(broker: WithCluster, node: int, address: peers.Address) -> list[dict[str, Any]]:
    """The groups one broker coordinates, with members, state and committed offsets."""
    [listed] = await peers.ask(broker, address, [(ApiKey.LIST_GROUPS, 4, ListGroupsRequest())])
    assert isinstance(listed, ListGroupsResponse)
    ids = sorted(g.group_id for g in listed.groups)
    if not ids:
        return []
    described, fetched = await peers.ask(broker, address, [
        (ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=ids)),
        (ApiKey.OFFSET_FETCH, 8, OffsetFetchRequest(groups=[
            OffsetFetchRequest.OffsetFetchRequestGroup(group_id=g, topics=None)
            for g in ids]))])
    assert isinstance(described, DescribeGroupsResponse)
    assert isinstance(fetched, OffsetFetchResponse)
    offsets = {g.group_id: [(t.name, p.partition_index, p.committed_offset)
                            for t in g.topics for p in t.partitions
                            if p.error_code == ErrorCode.NONE and p.committed_offset >= 0]
               for g in fetched.groups if g.error_code == ErrorCode.NONE}
    groups = []
    for g in described.groups:
        if g.error_code != ErrorCode.NONE or g.group_id not in offsets:
            continue
        groups.append({"group_id": g.group_id, "protocol_type": g.protocol_type,
                       "state": g.group_state, "members": len(g.members),
                       "coordinator": node, "offsets": sorted(offsets[g.group_id])})
    return groups


async def group_lags(broker: WithCluster) -> list[dict[str, Any]]:
    """Every group in the cluster with its committed offsets and lag per partition
    (the leader's high watermark - committed), as ``views.group_lags`` for one broker."""
    if broker.cluster is None:
        return [{**g, "coordinator": broker.node_id} for g in views.group_lags(broker)]
    addresses = peers.live_addresses(broker)
    answers = await asyncio.gather(*(_coordinated(broker, node, address)
                                     for node, address in sorted(addresses.items())),
                                   return_exceptions=True)
    found: dict[str, dict[str, Any]] = {}
    for answer in answers:
        if isinstance(answer, list):
            for group in answer:
                found.setdefault(group["group_id"], group)  # moving: either coordinator
        elif not isinstance(answer, peers.PeerUnreachable):
            log.warning("admin view: groups not read: %r", answer)
    wanted = {(t, p) for g in found.values() for t, p, _ in g["offsets"]}
    rows = [r for r in layout(broker) if (r["topic"], r["partition"]) in wanted]
    ends = await partition_offsets(broker, rows)
    groups = []
    for group_id in sorted(found):
        group = found[group_id]
        partitions = []
        for topic, partition, offset in group.pop("offsets"):
            end = ends.get((topic, partition))
            hw = -1 if end is None else end[1]
            partitions.append({"topic": topic, "partition": partition,
                               "committed_offset": offset, "high_watermark": hw,
                               "lag": 0 if end is None else max(hw - offset, 0)})
        groups.append({**group, "lag": sum(p["lag"] for p in partitions),
                       "partitions": partitions})
    return groups


class TopicRates:
    """Messages per second per topic: the growth of the high watermarks summed over the
    leaders, against the oldest snapshot of the last ``RATE_WINDOW_S`` seconds (taken
    as the views are asked; the first view says 0)."""

    def __init__(self) -> None:
        self._snapshots: deque[tuple[float, dict[str, int]]] = deque(maxlen=64)

    def rates(self, totals: dict[str, int]) -> dict[str, float]:
        now = time.monotonic()
        while self._snapshots and now - self._snapshots[0][0] > RATE_WINDOW_S:
            self._snapshots.popleft()
        then = self._snapshots[0] if self._snapshots else None
        self._snapshots.append((now, dict(totals)))
        if then is None or now - then[0] <= 0:
            return dict.fromkeys(totals, 0.0)
        return {name: round(max(total - then[1].get(name, total), 0) / (now - then[0]), 2)
                for name, total in totals.items()}


async def topics(broker: WithCluster, rates: TopicRates) -> dict[str, Any]:
    """Every topic of the cluster, its partitions' health and offsets from the leaders."""
    rows = layout(broker)
    ends = await partition_offsets(broker, rows)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        end = ends.get((row["topic"], row["partition"]))
        row["log_start_offset"], row["high_watermark"] = end if end is not None else (-1, -1)
        by_topic.setdefault(row["topic"], []).append(row)
    totals = {name: sum(max(p["high_watermark"], 0) for p in parts)
              for name, parts in by_topic.items()}
    per_second = rates.rates(totals)
    listed = []
    for name, parts in sorted(by_topic.items()):
        listed.append({
            "name": name, "internal": name.startswith("__"), "partitions": parts,
            "messages": sum(max(p["high_watermark"] - p["log_start_offset"], 0)
                            for p in parts if p["high_watermark"] >= 0),
            "messages_in_per_second": per_second.get(name, 0.0),
            "under_replicated_partitions": sum(p["under_replicated"] for p in parts),
            "offline_partitions": sum(p["offline"] for p in parts)})
    return {"topics": listed}
