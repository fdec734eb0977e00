"""aiohttp glue for the admin listener: routes to ``views``, /metrics, /openapi.json.

Runs in the broker's event loop; every handler reads in-memory state (``views``) and
does no disk work. Endpoints that need the broker answer 503 until recovery is done.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from commonlib.host_check import Handler, HostCheck
from logserver.admin import console, dashboard, throughput, views
from logserver.admin.basic_auth import BasicAuth
from logserver.admin.rates import RecentRates
from logserver.admin.state import AdminState
from logserver.admin.visibility import Visibility
from logserver.cluster_access import WithCluster
from logserver.config import Listener
from logserver.http_sites import serve

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

log = logging.getLogger(__name__)


def build_app(state: AdminState, host_check: HostCheck, auth: BasicAuth) -> web.Application:
    # prometheus_client (~2 MB) is imported and the registry built on the first scrape.
    registries: list[CollectorRegistry] = []
    recent = RecentRates(lambda: views.request_counts(state))
    rates = throughput.ClusterThroughput(throughput.OwnRates(state))
    app = web.Application(middlewares=[host_check.middleware, auth.middleware])
    for sampler in (recent, rates):
        app.on_startup.append(sampler.start)
        app.on_cleanup.append(sampler.close)

    def with_broker(view: Callable[[WithCluster, web.Request], Any]) -> Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            broker = state.broker
            if broker is None:
                return web.json_response({"error": "recovering the data directory"}, status=503)
            result = view(broker, request)
            if isinstance(result, web.StreamResponse):
                return result
            return web.json_response(result)
        return handle

    def topic(broker: WithCluster, request: web.Request) -> Any:
        name = request.match_info["name"]
        if not Visibility(broker, request).topic(name):
            return web.json_response({"error": f"not authorized to describe topic {name!r}"},
                                     status=403)
        found = views.topic(broker, name)
        if found is None:
            return web.json_response({"error": f"unknown topic {name!r}"}, status=404)
        return found

    async def connections(_: web.Request) -> web.Response:
        return web.json_response(views.connections(state))

    async def requests(_: web.Request) -> web.Response:
        return web.json_response(views.requests(state, recent))

    async def live(_: web.Request) -> web.Response:
        return web.json_response(views.status(state))

    async def ready(_: web.Request) -> web.Response:
        body = views.status(state)
        return web.json_response(body, status=200 if body["ready"] else 503)

    async def openapi(_: web.Request) -> web.Response:
        from logserver.admin.openapi import DOCUMENT  # built on import: only when asked for

        return web.json_response(DOCUMENT)

    async def own_throughput(_: web.Request) -> web.Response:
        return web.json_response(rates.own.rates())

    async def cluster_throughput(request: web.Request) -> web.Response:
        broker = state.broker
        if broker is None:
            return web.json_response({"error": "recovering the data directory"}, status=503)
        shown = Visibility(broker, request)
        rows = [{**row, "topics": {t: r for t, r in row.get("topics", {}).items()
                                   if shown.topic(t)}}
                for row in await rates.brokers(broker, request.headers.get("Authorization"))]
        return web.json_response({"window_seconds": throughput.WINDOW_S, "brokers": rows,
                                  "topics": throughput.topic_totals(rows)})

    async def scrape(request: web.Request) -> web.Response:
        broker = state.broker
        if broker is not None and broker.cluster is not None and not state.stopping:
            await rates.brokers(broker, request.headers.get("Authorization"))
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        from logserver.admin import metrics

        if not registries:
            registries.append(metrics.registry(state))
            registries[0].register(throughput.ThroughputCollector(rates))
        response = web.Response(body=generate_latest(registries[0]))
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    app.router.add_get("/v1/cluster/health", with_broker(lambda b, _: views.cluster_health(b)))
    app.router.add_get("/v1/topics", with_broker(
        lambda b, r: Visibility(b, r).topics(views.topics(b))))
    app.router.add_get("/v1/topics/{name}", with_broker(topic))
    app.router.add_get("/v1/connections", connections)
    app.router.add_get("/v1/requests", requests)
    app.router.add_get("/v1/status/live", live)
    app.router.add_get("/v1/status/ready", ready)
    app.router.add_get("/openapi.json", openapi)
    app.router.add_get("/metrics", scrape)
    app.router.add_get("/v1/broker/throughput", own_throughput)
    app.router.add_get("/v1/cluster/throughput", cluster_throughput)
    dashboard.add_routes(app, dashboard.DashboardFeed(state, rates))
    console.add_routes(app, state)  # /v1/cluster, /v1/groups (cluster-wide), /console
    return app


class AdminServer:
    """The admin listeners of one broker; a port already in use is logged, not fatal
    (the Kafka listeners matter more than the view of them)."""

    def __init__(self, state: AdminState, listeners: list[Listener],
                 allowed_hosts: list[str] | None = None, require_auth: bool = False) -> None:
        host_check = HostCheck(allowed_hosts or [], [listener.host for listener in listeners])
        app = build_app(state, host_check, BasicAuth(state, require_auth))
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        self._listeners = listeners
        self.addresses: list[tuple[str, int]] = []

    async def start(self) -> None:
        self.addresses = await serve(self._runner, self._listeners, "admin API",
                                     "admin.listeners")

    def log_addresses(self) -> None:
        for host, port in self.addresses:
            log.info("admin API on http://%s:%d (metrics at /metrics)", host, port)

    async def close(self) -> None:
        await self._runner.cleanup()
