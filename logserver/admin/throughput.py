"""Bytes in and out per second, per topic and per broker, of every broker in the cluster,
seen from any broker's admin API (``/v1/cluster/throughput``), dashboard and /metrics.

No Kafka API carries another broker's byte counters (Kafka UI reads each broker's JMX),
so each broker serves its own rates on its admin listener (``/v1/broker/throughput``)
and registers that listener's address in its etcd registration; the broker asked reads
the others' there, as Prometheus or Kafka UI would read each broker. Bounded: each peer
gets ``PEER_TIMEOUT_S``, the answer is kept ``CACHE_S`` and shared by every caller (the
API, the dashboard's feed, /metrics), and only one round of asks runs at a time, so page
views and scrapes never multiply the requests to the peers. A broker that does not
answer is listed as unreachable (``down`` when it has no session either), never dropped.
With ``admin.require.auth`` the caller's HTTP basic credentials are passed on (SCRAM
users are cluster-wide).

A broker's own rates are the growth of its partitions' byte counters over the last
``WINDOW_S`` seconds (admin/rates.py samples them once a second): bytes in are record
batches appended (a follower's replicated appends included), bytes out records fetched.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import aiohttp

from logserver.admin.rates import RecentRates

if TYPE_CHECKING:
    from prometheus_client.core import Metric

    from logserver.admin.state import AdminState
    from logserver.cluster_access import WithCluster

log = logging.getLogger(__name__)

PEER_TIMEOUT_S = 1.0
CACHE_S = 1.0
WINDOW_S = 10  # one of rates.WINDOWS_SECONDS
IN, OUT = "in", "out"


def _counts(state: AdminState) -> dict[str, int]:
    """Cumulative bytes in and out per topic: ``in/<topic>``, ``out/<topic>``."""
    broker = state.broker
    counts: dict[str, int] = {}
    if broker is None or state.stopping:
        return counts
    for name in broker.storage.topic_names():
        stats = broker.storage.partition_stats(name)
        if stats is not None:
            counts[f"{IN}/{name}"] = sum(s.bytes_in for s in stats)
            counts[f"{OUT}/{name}"] = sum(s.bytes_out for s in stats)
    return counts


class OwnRates:
    """This broker's byte rates, from its counters sampled once a second."""

    def __init__(self, state: AdminState) -> None:
        self.recent = RecentRates(lambda: _counts(state))

    def rates(self) -> dict[str, Any]:
        topics: dict[str, dict[str, float]] = {}
        for key, windows in self.recent.rates().items():
            way, topic = key.split("/", 1)
            row = topics.setdefault(topic, {"bytes_in_per_second": 0.0,
                                            "bytes_out_per_second": 0.0})
            row[f"bytes_{way}_per_second"] = windows[WINDOW_S]
        return {"window_seconds": WINDOW_S, "topics": topics,
                "bytes_in_per_second": round(sum(
                    t["bytes_in_per_second"] for t in topics.values()), 3),
                "bytes_out_per_second": round(sum(
                    t["bytes_out_per_second"] for t in topics.values()), 3)}


class ClusterThroughput:
    """Every broker's rates, asked of the peers at most once per ``CACHE_S``."""

    def __init__(self, own: OwnRates) -> None:
        self.own = own
        self.last: list[dict[str, Any]] = []
        self._at = float("-inf")
        self._lock = asyncio.Lock()
        self._session: aiohttp.ClientSession | None = None

    async def brokers(self, broker: WithCluster, authorization: str | None = None
                      ) -> list[dict[str, Any]]:
        """One row per broker: node id, state, reachable, and its rates when reachable."""
        async with self._lock:  # a second caller meanwhile gets the same round's answer
            if time.monotonic() - self._at >= CACHE_S:
                self.last = await self._gather(broker, authorization)
                self._at = time.monotonic()
            return self.last

    async def _gather(self, broker: WithCluster, authorization: str | None) -> list[dict[str, Any]]:
        own = {"node_id": broker.node_id, "state": "alive", "reachable": True,
               **self.own.rates()}
        cluster = broker.cluster
        if cluster is None:
            return [own]
        live = set(cluster.model.brokers)
        admins: dict[int, tuple[str, int] | None] = {
            n: b.admin for n, b in {**cluster.known_brokers.ever, **cluster.model.brokers}.items()}
        for versioned in cluster.model.partitions.values():
            for node in versioned.state.replicas:
                admins.setdefault(node, None)
        others = sorted(n for n in admins if n != broker.node_id)
        answers = await asyncio.gather(*(self._ask(admins[n], authorization) for n in others))
        rows = [own]
        for node, answer in zip(others, answers, strict=True):
            state = "alive" if node in live else "down"
            if isinstance(answer, dict):
                rows.append({"node_id": node, "state": state, "reachable": True, **answer})
            else:
                rows.append({"node_id": node, "state": state, "reachable": False,
                             "error": answer})
        return sorted(rows, key=lambda r: r["node_id"])

    async def _ask(self, address: tuple[str, int] | None,
                   authorization: str | None) -> dict[str, Any] | str:
        """The peer's own rates, or why not."""
        if address is None:
            return "no admin listener registered"
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=PEER_TIMEOUT_S))
        headers = {} if authorization is None else {"Authorization": authorization}
        url = f"http://{address[0]}:{address[1]}/v1/broker/throughput"
        try:
            async with self._session.get(url, headers=headers) as response:
                if response.status != 200:
                    return f"HTTP {response.status} from {url}"
                body: dict[str, Any] = await response.json()
                return body
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            log.debug("throughput of %s: %r", url, exc)
            return f"{url}: {exc or type(exc).__name__}"

    async def start(self, _: object = None) -> None:
        await self.own.recent.start()

    async def close(self, _: object = None) -> None:
        await self.own.recent.close()
        if self._session is not None:
            await self._session.close()


def topic_totals(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per topic, the bytes in and out per second summed over the reachable brokers."""
    totals: dict[str, dict[str, float]] = {}
    for row in rows:
        for topic, rates in row.get("topics", {}).items():
            total = totals.setdefault(topic, {"bytes_in_per_second": 0.0,
                                              "bytes_out_per_second": 0.0})
            for key in total:
                total[key] = round(total[key] + rates.get(key, 0.0), 3)
    return totals


class ThroughputCollector:
    """/metrics: every broker's byte rates as of the last round (the scrape handler
    refreshes it first, within the cache): ``logserver_cluster_bytes_in_per_second``
    and ``..._out_...`` by node and topic, and ``logserver_cluster_broker_reachable``.
    Named apart from Kafka's per-broker meters, so summing those over the brokers' own
    scrapes does not count a broker twice."""

    def __init__(self, throughput: ClusterThroughput) -> None:
        self.throughput = throughput

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily  # loaded with /metrics

        rows = self.throughput.last
        reachable = GaugeMetricFamily("logserver_cluster_broker_reachable", "1 when the "
                                      "broker's admin listener gave its byte rates, else 0.",
                                      labels=["node_id"])
        rates = {way: GaugeMetricFamily(
            f"logserver_cluster_bytes_{way}_per_second", f"Bytes {way} per second of each "
            f"broker and topic (last {WINDOW_S} s), as that broker reports them.",
            labels=["node_id", "topic"]) for way in (IN, OUT)}
        for row in rows:
            node = str(row["node_id"])
            reachable.add_metric([node], 1 if row["reachable"] else 0)
            for topic, values in row.get("topics", {}).items():
                for way, family in rates.items():
                    family.add_metric([node, topic], values[f"bytes_{way}_per_second"])
        yield reachable
        yield from rates.values()
