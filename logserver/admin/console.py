"""The console: the cluster-wide admin routes and the read-only console page.

Routes: ``/v1/cluster`` (every broker alive or down, the controller), ``/v1/groups``
(every group with its lag, whichever broker coordinates it), ``/v1/cluster/topics``
(every partition's health and offsets from its leader, messages per second per topic),
``/v1/topics/{name}/records`` (the topic browser), ``/v1/topics/{name}/configs``,
``/v1/brokers/{id}/configs``, ``/v1/acls``; and ``/console`` with its static files
(package data: nothing loaded from elsewhere). Every answer is filtered by the Kafka
ACLs as the Kafka APIs would (``visibility``): READ to browse a topic's records,
DESCRIBE_CONFIGS for configs, DESCRIBE on the cluster for the ACLs.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

from aiohttp import web

from logserver.admin import cluster_views, console_views
from logserver.admin.records import BrowseError, Page, browse
from logserver.admin.state import AdminState
from logserver.admin.visibility import Visibility
from logserver.cluster_access import WithCluster
from logserver.security.acl import CLUSTER_NAME, AclOperation, ResourceType

log = logging.getLogger(__name__)

STATIC_FILES = {"console.html": "text/html", "console.js": "text/javascript",
                "console.css": "text/css"}

INT32_MAX = 2**31 - 1
View = Callable[[WithCluster, web.Request], Awaitable[Any]]


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def add_routes(app: web.Application, state: AdminState) -> None:
    roster = cluster_views.BrokerRoster()
    rates = cluster_views.TopicRates()

    def with_broker(view: View) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            broker = state.broker
            if broker is None:
                return _error(503, "recovering the data directory")
            result = await view(broker, request)
            if isinstance(result, web.StreamResponse):
                return result
            return web.json_response(result)
        return handle

    async def cluster(broker: WithCluster, _: web.Request) -> Any:
        return roster.cluster(broker)

    async def groups(broker: WithCluster, request: web.Request) -> Any:
        return {"groups": Visibility(broker, request).groups(
            await cluster_views.group_lags(broker))}

    async def topics(broker: WithCluster, request: web.Request) -> Any:
        seen = Visibility(broker, request)
        listed = await cluster_views.topics(broker, rates)
        return {"topics": [t for t in listed["topics"] if seen.topic(t["name"])]}

    async def records(broker: WithCluster, request: web.Request) -> Any:
        name = request.match_info["name"]
        if not Visibility(broker, request).may(AclOperation.READ, ResourceType.TOPIC, name):
            return _error(403, f"not authorized to read topic {name!r}")
        try:
            return await browse(broker, Page.parse(name, request.query))
        except BrowseError as exc:
            return _error(exc.status, str(exc))

    async def configs_of(broker: WithCluster, request: web.Request, resource_type: int,
                         name: str, acl: tuple[ResourceType, str]) -> Any:
        if not Visibility(broker, request).may(AclOperation.DESCRIBE_CONFIGS, *acl):
            return _error(403, "not authorized to describe configs")
        known = [b["node_id"] for b in roster.brokers(broker)]
        try:
            return await console_views.configs(broker, resource_type, name, known)
        except console_views.ConfigsError as exc:
            return _error(exc.status, str(exc))

    async def topic_configs(broker: WithCluster, request: web.Request) -> Any:
        name = request.match_info["name"]
        return await configs_of(broker, request, console_views.TOPIC, name,
                                (ResourceType.TOPIC, name))

    async def broker_configs(broker: WithCluster, request: web.Request) -> Any:
        node = request.match_info["node_id"]
        if not node.isdigit() or int(node) > INT32_MAX:
            return _error(400, "a broker is named by its node id")
        return await configs_of(broker, request, console_views.BROKER, node,
                                (ResourceType.CLUSTER, CLUSTER_NAME))

    async def acls(broker: WithCluster, request: web.Request) -> Any:
        if not Visibility(broker, request).may(AclOperation.DESCRIBE, ResourceType.CLUSTER,
                                               CLUSTER_NAME):
            return _error(403, "not authorized to describe the cluster's ACLs")
        return console_views.acls(broker)

    static = resources.files("logserver.admin") / "static"

    async def page(_: web.Request) -> web.Response:
        return web.Response(body=(static / "console.html").read_bytes(),
                            content_type="text/html", headers={"Cache-Control": "no-cache"})

    async def asset(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in STATIC_FILES:
            raise web.HTTPNotFound()
        return web.Response(body=(static / name).read_bytes(), content_type=STATIC_FILES[name],
                            headers={"Cache-Control": "no-cache"})

    app.router.add_get("/v1/cluster", with_broker(cluster))
    app.router.add_get("/v1/groups", with_broker(groups))
    app.router.add_get("/v1/cluster/topics", with_broker(topics))
    app.router.add_get("/v1/topics/{name}/records", with_broker(records))
    app.router.add_get("/v1/topics/{name}/configs", with_broker(topic_configs))
    app.router.add_get("/v1/brokers/{node_id}/configs", with_broker(broker_configs))
    app.router.add_get("/v1/acls", with_broker(acls))
    app.router.add_get("/console", page)
    app.router.add_get("/console/static/{name}", asset)
