"""aiohttp routes of the REST Proxy v2 API and the listener that serves them.

Runs in the broker's event loop, as the admin listener does (logserver/admin/http.py);
a port already in use is logged, not fatal. Each request first gets its principal
(logserver.rest.auth), then runs through the Kafka handlers (logserver.rest.kafka_calls).
"""

from __future__ import annotations

import ipaddress
import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from commonlib.host_check import HostCheck
from kafkaproto import ErrorCode
from logserver.config import Listener
from logserver.http_sites import serve
from logserver.internal_topics import INTERNAL_TOPICS
from logserver.rest import kafka_calls, to_node
from logserver.rest.auth import principal_of
from logserver.rest.consumers import Consumers, add_consumer_routes
from logserver.rest.errors import (
    FORBIDDEN,
    PARTITION_NOT_FOUND,
    TOO_LARGE,
    TOPIC_NOT_FOUND,
    RestError,
    from_kafka,
)
from logserver.rest.formats import (
    accepted_format,
    produce_format,
    response_type,
)
from logserver.rest.http_io import (
    MAX_WAIT_MS,
    int_param,
    read_json,
    read_waiting,
    record_view,
    reply,
)
from logserver.rest.produce import Producer
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.cluster_access import WithCluster

log = logging.getLogger(__name__)

# How long a stopping broker lets parked long polls run before dropping them (the
# broker's whole shutdown grace is 5 s).
SHUTDOWN_TIMEOUT_S = 1.0


def build_app(broker: WithCluster, auth_required: bool, consumers: Consumers,
              host_check: HostCheck | None = None) -> web.Application:
    """``host_check``: refuse requests for names not this server's (DNS rebinding)."""
    producer = Producer(broker)

    @web.middleware
    async def errors(request: web.Request,
                     handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        try:
            host = request.headers.get("Host")
            if host_check is not None and not host_check.permits(host):
                raise RestError(403, FORBIDDEN, f"Host {host!r} is not a name of this server "
                                "(admin.allowed.hosts)")
            principal = await principal_of(broker, auth_required,
                                           request.headers.get("Authorization"),
                                           request.remote or "?")
            kafka_calls.act_as(principal, f"{request.remote or ''}:0")
            return await handler(request)
        except RestError as exc:
            response = reply(exc.body(), exc.status)
            if exc.status == 401:
                response.headers["WWW-Authenticate"] = 'Basic realm="logserver"'
            return response
        except web.HTTPRequestEntityTooLarge as exc:
            return reply({"error_code": TOO_LARGE, "message": exc.text}, 413)
        except web.HTTPException as exc:
            return reply({"error_code": exc.status, "message": exc.reason}, exc.status)

    def topic_known(name: str) -> int:
        if checks.denied(broker, checks.METADATA_TOPIC, name):
            raise from_kafka(ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"topic {name}")
        count = broker.topics.partition_count(name)
        if count is None:
            raise RestError(404, TOPIC_NOT_FOUND, f"Topic {name} not found.")
        return count

    def partition_views(name: str, partitions: range) -> list[dict[str, Any]]:
        """Leader, replicas and ISR as the control plane has them (the cluster's
        registration in etcd; on a single node this broker, for every partition)."""
        known = {view.index: view for view in broker.control.partitions(name)}
        found = []
        for partition in partitions:
            view = known.get(partition)
            leader, replicas, isr = ((-1, [], []) if view is None
                                     else (view.leader, view.replicas, view.isr))
            found.append({"partition": partition, "leader": leader,
                          "replicas": [{"broker": r, "leader": r == leader, "in_sync": r in isr}
                                       for r in replicas]})
        return found

    def partition_arg(request: web.Request, count: int) -> int:
        try:
            partition = int(request.match_info["partition"])
        except ValueError:
            raise RestError(404, PARTITION_NOT_FOUND, "Partition not found.") from None
        if not 0 <= partition < count:
            raise RestError(404, PARTITION_NOT_FOUND, f"Partition {partition} not found.")
        return partition

    async def list_topics(_: web.Request) -> web.Response:
        names = sorted(name for name in broker.topics.topic_names()
                       if name not in INTERNAL_TOPICS
                       and checks.allowed(broker, checks.METADATA_TOPIC, name))
        return reply(names)

    async def get_topic(request: web.Request) -> web.Response:
        name = request.match_info["topic"]
        count = topic_known(name)
        configs = dict(broker.storage.topic_overrides(name) or {})
        return reply({"name": name, "configs": configs,
                      "partitions": partition_views(name, range(count))})

    async def get_partitions(request: web.Request) -> web.Response:
        name = request.match_info["topic"]
        return reply(partition_views(name, range(topic_known(name))))

    async def get_partition(request: web.Request) -> web.Response:
        name = request.match_info["topic"]
        partition = partition_arg(request, topic_known(name))
        return reply(partition_views(name, range(partition, partition + 1))[0])

    async def produce(request: web.Request) -> web.Response:
        fmt = produce_format(request.headers.get("Content-Type", ""))
        body = await read_json(request)
        partition = None
        if "partition" in request.match_info:
            partition = partition_arg(request, topic_known(request.match_info["topic"]))
        answer = await producer.produce(request.match_info["topic"], fmt, body, partition)
        return reply(answer)

    async def records(request: web.Request) -> web.Response:
        """Redpanda's GET .../partitions/{p}/records?offset=&timeout=&max_bytes=."""
        name = request.match_info["topic"]
        partition = partition_arg(request, topic_known(name))
        offset = int_param(request, "offset")
        timeout_ms = min(max(int_param(request, "timeout", 1000), 0), MAX_WAIT_MS)
        max_bytes = max(int_param(request, "max_bytes", 1_048_576), 1)
        fmt = accepted_format(request.headers.get("Accept", ""))
        error = kafka_calls.read_error(broker, name, partition)
        if error:
            raise from_kafka(error, f"{name}-{partition}")
        start = broker.storage.log_start_offset(name, partition) or 0
        remote = to_node.remote_leader(broker, name, partition) is not None
        if offset < start and not remote:
            raise RestError(416, 41601, f"offset {offset} is below the log start offset {start}")
        failed: dict[tuple[str, int], int] = {}
        found = await read_waiting(broker, [(name, partition)], {(name, partition): offset},
                                   max_bytes, timeout_ms, errors=failed)
        if failed.get((name, partition)) == ErrorCode.OFFSET_OUT_OF_RANGE:
            raise RestError(416, 41601, f"offset {offset} is out of range")
        if failed.get((name, partition)):
            raise from_kafka(failed[(name, partition)], f"{name}-{partition}")
        return reply([record_view(name, partition, r, fmt) for r in found.get((name, partition), [])],
                     content_type=response_type(fmt))

    app = web.Application(middlewares=[errors],
                          client_max_size=broker.config["socket.request.max.bytes"])
    app.router.add_get("/topics", list_topics)
    app.router.add_get("/topics/{topic}", get_topic)
    app.router.add_post("/topics/{topic}", produce)
    app.router.add_get("/topics/{topic}/partitions", get_partitions)
    app.router.add_get("/topics/{topic}/partitions/{partition}", get_partition)
    app.router.add_post("/topics/{topic}/partitions/{partition}", produce)
    app.router.add_get("/topics/{topic}/partitions/{partition}/records", records)
    add_consumer_routes(app, consumers)
    return app


class RestProxyServer:
    """The ``rest.proxy.listeners`` of one broker."""

    def __init__(self, broker: WithCluster, listeners: list[Listener], auth_required: bool,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.consumers = Consumers(broker, broker.config["consumer.instance.timeout.ms"])
        host_check = None
        if listeners and all(_loopback(listener.host) for listener in listeners):
            host_check = HostCheck(broker.config["admin.allowed.hosts"],
                                   [listener.host for listener in listeners])
        self._runner = web.AppRunner(build_app(broker, auth_required, self.consumers, host_check),
                                     access_log=None, handle_signals=False,
                                     shutdown_timeout=SHUTDOWN_TIMEOUT_S)
        self._listeners = listeners
        self._ssl_context = ssl_context
        self.addresses: list[tuple[str, int]] = []

    async def start(self) -> None:
        self.addresses = await serve(self._runner, self._listeners, "REST Proxy",
                                     "rest.proxy.listeners", self._ssl_context)
        if not self._listeners:
            return
        self.consumers.start()
        scheme = "https" if self._ssl_context is not None else "http"
        for host, port in self.addresses:
            log.info("REST Proxy on %s://%s:%d", scheme, host, port)

    async def close(self) -> None:
        await self.consumers.close()
        await self._runner.cleanup()


def _loopback(host: str) -> bool:
    """Whether a listener host only takes connections from this machine: there a web page
    could reach it through DNS rebinding, so the Host header is checked."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
