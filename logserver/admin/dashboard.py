"""The live dashboard: a sampler that turns the broker's counters into rates once a second,
and server-sent events (``/dashboard/events``) that push each sample to the open pages.

In cluster mode the sample is the cluster's, as the console's views are
(``cluster_views``, asking the other brokers over the Kafka protocol): every group with
its lag whichever broker coordinates it, every partition with its leader's high
watermark, every broker alive or down, and each topic's messages per second summed over
its leaders, and each broker's and topic's bytes in and out per second as every broker
reports its own (admin/throughput.py). Sizes stay this broker's (its replicas').
That part asks every broker over the network, so it is gathered only while a page is
open; samples taken with no page open (kept for a page opened later) are this broker's.

Rates are computed here, from the difference of the cumulative counters between two
samples over the measured interval, so every page shows the same numbers and a page
opened late still gets the recent past (the last ``HISTORY`` samples come first).
The page itself and its script are package data (``logserver/admin/static``): nothing
is loaded from elsewhere, so it works offline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import deque
from importlib import resources
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web

from logserver.admin import cluster_views, views
from logserver.admin.throughput import ClusterThroughput, topic_totals

if TYPE_CHECKING:
    from logserver.admin.state import AdminState
    from logserver.cluster_access import WithCluster

log = logging.getLogger(__name__)

SAMPLE_INTERVAL_SECONDS = 1.0
HISTORY = 120  # samples kept for pages opened later (two minutes at one a second)
BRIDGE_TIMEOUT_SECONDS = 0.5
STATIC_FILES = {"dashboard.html": "text/html", "dashboard.js": "text/javascript",
                "dashboard.css": "text/css"}


def _rate(now: int, before: int | None, seconds: float) -> float:
    if before is None or seconds <= 0:
        return 0.0
    return round(max(now - before, 0) / seconds, 2)


class BridgeLink:
    """Reads the MQTT bridge's admin API (``/v1/status``, ``/v1/devices``) for the page."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self._session: aiohttp.ClientSession | None = None

    async def read(self) -> dict[str, Any] | None:
        """The bridge's counters and devices; None while it does not answer (restarting)."""
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=BRIDGE_TIMEOUT_SECONDS))
        try:
            async with self._session.get(self.url + "/v1/status") as response:
                status = await response.json()
            async with self._session.get(self.url + "/v1/devices") as response:
                devices = await response.json()
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None
        return {**status, "devices": devices.get("devices", [])}

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


class DashboardFeed:
    """Samples the broker every ``interval`` seconds and fans each sample out to the
    subscribed event streams (one bounded queue each: a stalled page loses samples,
    it never holds the broker's memory)."""

    def __init__(self, state: AdminState, throughput: ClusterThroughput,
                 interval: float = SAMPLE_INTERVAL_SECONDS) -> None:
        self.state = state
        self.throughput = throughput
        self.authorization: str | None = None  # a page's, passed on to the peers
        self.interval = interval
        self.bridge: BridgeLink | None = None  # once state.bridge_admin_url is known
        self.history: deque[dict[str, Any]] = deque(maxlen=HISTORY)
        self.subscribers: set[asyncio.Queue[dict[str, Any] | None]] = set()
        self._previous: dict[str, Any] = {}
        self._roster = cluster_views.BrokerRoster()
        self._rates = cluster_views.TopicRates()
        self._task: asyncio.Task[None] | None = None

    async def start(self, _: web.Application | None = None) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self, _: web.Application | None = None) -> None:
        for queue in list(self.subscribers):
            while queue.full():  # a page behind: it gets the end, not the backlog
                queue.get_nowait()
            queue.put_nowait(None)  # ends that page's stream
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.bridge is not None:
            await self.bridge.close()

    async def _run(self) -> None:
        while True:
            if self.state.stopping:  # the broker closes its storage meanwhile
                await asyncio.sleep(self.interval)
                continue
            try:
                sample = await self.sample()
            except Exception:  # a view that fails must not end the feed
                log.exception("dashboard sample failed")
            else:
                self.history.append(sample)
                for queue in list(self.subscribers):
                    with contextlib.suppress(asyncio.QueueFull):
                        queue.put_nowait(sample)
            await asyncio.sleep(self.interval)

    async def sample(self) -> dict[str, Any]:
        now = time.monotonic()
        previous = self._previous
        seconds = now - previous.get("at", now)
        counters: dict[str, Any] = {"at": now}
        sample: dict[str, Any] = {"time": round(time.time(), 3), "interval_seconds": seconds,
                                  "ready": self.state.ready, "topics": [], "groups": [],
                                  "partitions": [], "cluster": None, "devices": None}
        broker = self.state.broker
        if broker is not None:
            sample["topics"] = _topics(broker, previous, counters, seconds)
            sample["groups"] = [{k: g[k] for k in ("group_id", "state", "members", "lag")}
                                for g in views.group_lags(broker)]
            sample["partitions"] = _partitions(broker)
            sample["cluster"] = _cluster(broker)
            if broker.cluster is not None and self.subscribers:
                await self._cluster_wide(broker, sample)
        sample["requests_per_second"] = _requests(self.state, previous, counters, seconds)
        url = self.state.bridge_admin_url
        if url is not None and (self.bridge is None or self.bridge.url != url.rstrip("/")):
            if self.bridge is not None:
                await self.bridge.close()
            self.bridge = BridgeLink(url)
        if self.bridge is not None:
            status = await self.bridge.read()
            sample["devices"] = _devices(status, previous, counters, seconds)
        self._previous = counters
        return sample

    async def _cluster_wide(self, broker: WithCluster, sample: dict[str, Any]) -> None:
        """Replace the local groups, partitions, brokers and message rates by the
        cluster's (a broker that does not answer leaves its part out, never the sample)."""
        groups, listed, rates = await asyncio.gather(
            cluster_views.group_lags(broker), cluster_views.topics(broker, self._rates),
            self.throughput.brokers(broker, self.authorization))
        totals = topic_totals(rates)
        sample["groups"] = [{k: g[k] for k in ("group_id", "state", "members", "lag",
                                               "coordinator")} for g in groups]
        local = {t["name"]: t for t in sample["topics"]}
        held = {(p["topic"], p["partition"]): p for p in sample["partitions"]}
        topics, partitions = [], []
        for t in listed["topics"]:
            here = local.get(t["name"], {})
            moved = totals.get(t["name"], {})
            topics.append({"name": t["name"], "internal": t["internal"],
                           "partitions": len(t["partitions"]),
                           "size_bytes": here.get("size_bytes", 0),
                           "messages": t["messages"],
                           "messages_in_per_second": t["messages_in_per_second"],
                           "bytes_in_per_second": moved.get("bytes_in_per_second", 0.0),
                           "bytes_out_per_second": moved.get("bytes_out_per_second", 0.0),
                           "under_replicated_partitions": t["under_replicated_partitions"],
                           "offline_partitions": t["offline_partitions"]})
            for p in t["partitions"]:
                here = held.get((p["topic"], p["partition"]), {})
                partitions.append({
                    "topic": p["topic"], "partition": p["partition"], "leader": p["leader"],
                    "replicas": p["replicas"], "isr": p["isr"],
                    "under_replicated": p["under_replicated"], "offline": p["offline"],
                    "size_bytes": here.get("size_bytes"),
                    "log_end_offset": here.get("log_end_offset"),
                    "high_watermark": p["high_watermark"]})
        sample["topics"], sample["partitions"] = topics, partitions
        cluster = sample["cluster"]
        moving = {r["node_id"]: r for r in rates}
        cluster["brokers"] = [
            {**{k: b[k] for k in ("node_id", "host", "port", "state")},
             "reachable": moving.get(b["node_id"], {}).get("reachable", False),
             "bytes_in_per_second": moving.get(b["node_id"], {}).get("bytes_in_per_second"),
             "bytes_out_per_second": moving.get(b["node_id"], {}).get("bytes_out_per_second")}
            for b in self._roster.brokers(broker)]

    async def events(self, request: web.Request) -> web.StreamResponse:
        """``text/event-stream``: the history, then one ``data:`` line per sample."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
        await response.prepare(request)
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(maxsize=HISTORY)
        self.subscribers.add(queue)
        self.authorization = request.headers.get("Authorization", self.authorization)
        try:
            await response.write(b"retry: 1000\nevent: history\ndata: "
                                 + json.dumps(list(self.history)).encode() + b"\n\n")
            while True:
                sample = await queue.get()
                if sample is None:
                    break
                await response.write(b"data: " + json.dumps(sample).encode() + b"\n\n")
        except ConnectionResetError:  # the page went away
            pass
        finally:
            self.subscribers.discard(queue)
        return response


def _topics(broker: WithCluster, previous: dict[str, Any], counters: dict[str, Any],
            seconds: float) -> list[dict[str, Any]]:
    listed = []
    before = previous.get("topics", {})
    totals = counters["topics"] = {}
    for name in broker.storage.topic_names():
        stats = broker.storage.partition_stats(name)
        if stats is None:
            continue
        now = (sum(s.messages_in for s in stats), sum(s.bytes_in for s in stats),
               sum(s.bytes_out for s in stats))
        totals[name] = now
        then = before.get(name, (None, None, None))
        listed.append({
            "name": name, "internal": name.startswith("__"), "partitions": len(stats),
            "size_bytes": sum(s.size_bytes for s in stats),
            "messages": sum(s.log_end_offset - s.log_start_offset for s in stats),
            "messages_in_per_second": _rate(now[0], then[0], seconds),
            "bytes_in_per_second": _rate(now[1], then[1], seconds),
            "bytes_out_per_second": _rate(now[2], then[2], seconds),
        })
    return listed


def _partitions(broker: WithCluster) -> list[dict[str, Any]]:
    """Every partition this broker holds (cluster mode: every one the cluster knows, the
    sizes of those held here), with its leader and in-sync replicas."""
    cluster = broker.cluster
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    if cluster is not None:
        for (topic, index), versioned in sorted(cluster.model.partitions.items()):
            state = versioned.state
            rows[(topic, index)] = {"topic": topic, "partition": index, "leader": state.leader,
                                    "replicas": list(state.replicas), "isr": list(state.isr),
                                    "size_bytes": None, "log_end_offset": None}
    for topic in broker.storage.topic_names():
        for s in broker.storage.partition_stats(topic) or ():
            row = rows.setdefault((topic, s.partition), {
                "topic": topic, "partition": s.partition, "leader": broker.node_id,
                "replicas": [broker.node_id], "isr": [broker.node_id]})
            row["size_bytes"] = s.size_bytes
            row["log_end_offset"] = s.log_end_offset
    return [rows[key] for key in sorted(rows)]


def _cluster(broker: WithCluster) -> dict[str, Any]:
    summary = views.cluster(broker)
    return {"cluster_id": summary["cluster_id"], "controller_id": summary["controller_id"],
            "mode": "single" if broker.cluster is None else "cluster",
            "brokers": [{k: b[k] for k in ("node_id", "host", "port")}
                        for b in summary["brokers"]]}


def _requests(state: AdminState, previous: dict[str, Any], counters: dict[str, Any],
              seconds: float) -> dict[str, float]:
    before = previous.get("requests", {})
    now = counters["requests"] = {views.api_name(key): h.count for key, h
                                  in state.stats.request_metrics.by_api.items()}
    return {name: _rate(count, before.get(name), seconds) for name, count in sorted(now.items())}


def _devices(status: dict[str, Any] | None, previous: dict[str, Any],
             counters: dict[str, Any], seconds: float) -> dict[str, Any]:
    if status is None:
        return {"reachable": False}
    before = previous.get("bridge", {})
    counters["bridge"] = {k: status.get(k, 0) for k in ("msgs_in", "msgs_out")}
    return {"reachable": True, "connected": status.get("connections", 0),
            "sessions": status.get("sessions", 0),
            "subscriptions": status.get("subscriptions", 0),
            "publishes_in_per_second": _rate(status.get("msgs_in", 0), before.get("msgs_in"),
                                             seconds),
            "publishes_out_per_second": _rate(status.get("msgs_out", 0), before.get("msgs_out"),
                                              seconds),
            "clients": status.get("devices", [])}


def add_routes(app: web.Application, feed: DashboardFeed) -> None:
    """``/`` and ``/dashboard`` (the page), its static files, and the event stream."""
    static = resources.files("logserver.admin") / "static"

    def serve(name: str) -> web.Response:
        return web.Response(body=(static / name).read_bytes(), content_type=STATIC_FILES[name],
                            headers={"Cache-Control": "no-cache"})

    async def page(_: web.Request) -> web.Response:
        return serve("dashboard.html")

    async def asset(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in STATIC_FILES:
            raise web.HTTPNotFound()
        return serve(name)

    async def no_icon(_: web.Request) -> web.Response:
        return web.Response(status=204)  # browsers ask; nothing to show, nothing to log

    app.router.add_get("/favicon.ico", no_icon)
    app.router.add_get("/", page)
    app.router.add_get("/dashboard", page)
    app.router.add_get("/dashboard/static/{name}", asset)
    app.router.add_get("/dashboard/events", feed.events)
    app.on_startup.append(feed.start)
    app.on_shutdown.append(feed.close)
