"""The bridge's admin listener (``--admin-listen``): Prometheus /metrics and a JSON status.

Runs in the bridge's event loop and reads only the counters the bridge already keeps
(``Bridge.snapshot``); the metrics come from a scrape-time collector in a registry of
the bridge's own.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Iterator
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from commonlib.host_check import HostCheck
from commonlib.latency import LatencyHistogram

log = logging.getLogger(__name__)

Snapshot = Callable[[], dict[str, Any]]
Devices = Callable[[], list[dict[str, Any]]]

# snapshot key -> (metric name, help); gauges are current values, counters since start-up
GAUGES = {
    "connections": ("mqtt_connected_devices", "MQTT clients connected now."),
    "sessions": ("mqtt_sessions", "Sessions held (connected or persistent)."),
    "subscriptions": ("mqtt_subscriptions", "Subscriptions over all sessions."),
}
COUNTERS = {
    "msgs_in": ("mqtt_publishes_in", "PUBLISH packets received from clients."),
    "msgs_out": ("mqtt_publishes_out", "PUBLISH packets sent to clients."),
    "bytes_in": ("mqtt_bytes_in", "Bytes received from clients."),
    "bytes_out": ("mqtt_bytes_out", "Bytes sent to clients."),
    "connections_total": ("mqtt_connections", "Connections accepted."),
    "refused": ("mqtt_connections_refused", "Connections refused by the limits."),
    "protocol_errors": ("mqtt_protocol_errors", "Connections closed for protocol errors."),
    "uplink_records": ("mqtt_uplink_records", "Records handed to the log producer."),
    "uplink_acked": ("mqtt_uplink_records_acked", "Uplink records the log acknowledged."),
    "downlink_records": ("mqtt_downlink_records", "Records fetched from the log for devices."),
    "denied_publish": ("mqtt_publishes_denied", "PUBLISH packets the ACL refused."),
    "sessions_taken_over": ("mqtt_sessions_taken_over", "Sessions handed to another bridge."),
    "tls_handshake_failures": ("mqtt_tls_handshake_failures",
                               "Failed or timed-out TLS handshakes on the MQTT TLS listener."),
    "login_failures": ("mqtt_login_failures", "CONNECTs refused for bad credentials."),
    "logins_delayed": ("mqtt_logins_delayed", "Logins held back because their address had "
                       "failed logins just before (failed_login_delay_ms, doubling per failure)."),
}


class BridgeCollector(Collector):
    def __init__(self, snapshot: Snapshot, puback: LatencyHistogram | None = None) -> None:
        self._snapshot = snapshot
        self._puback = puback

    def collect(self) -> Iterator[Metric]:
        current = self._snapshot()
        for key, (name, documentation) in GAUGES.items():
            yield GaugeMetricFamily(name, documentation, value=current[key])
        for key, (name, documentation) in COUNTERS.items():
            yield CounterMetricFamily(name, documentation, value=current[key])
        dropped = CounterMetricFamily(
            "mqtt_messages_dropped", "Outgoing messages dropped: a session's queue was full "
            "(max_queued) while its client did not acknowledge.", labels=["reason"])
        dropped.add_metric(["queue_full"], current["queued_dropped"])
        yield dropped
        if self._puback is not None:
            latency = HistogramMetricFamily(
                "mqtt_puback_latency_seconds", "From a QoS 1/2 PUBLISH received to its PUBACK "
                "(PUBREC) written: the log write and its acknowledgement in between.")
            latency.add_metric([], self._puback.cumulative(), self._puback.total)
            yield latency


def build_app(snapshot: Snapshot, devices: Devices = list,
              puback: LatencyHistogram | None = None, host: str = "127.0.0.1") -> web.Application:
    """The bridge's admin API; like the server's, it answers only to its own host names
    (commonlib/host_check.py: no DNS rebinding)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BridgeCollector(snapshot, puback))

    async def scrape(_: web.Request) -> web.Response:
        response = web.Response(body=generate_latest(registry))
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    async def status(_: web.Request) -> web.Response:
        return web.json_response(snapshot())

    async def connected(_: web.Request) -> web.Response:
        return web.json_response({"devices": devices()})

    app = web.Application(middlewares=[HostCheck([], [host]).middleware])
    app.router.add_get("/metrics", scrape)
    app.router.add_get("/v1/status", status)
    app.router.add_get("/v1/devices", connected)
    return app


class AdminListener:
    """Serves ``build_app`` on host:port; ``port`` is the bound one (0 picks a free one).

    ``sock``: a listening socket inherited from ``logserver --mqtt-bridge`` instead, so
    the server knows the address without a race and keeps it over bridge restarts.
    """

    def __init__(self, snapshot: Snapshot, host: str, port: int, devices: Devices = list,
                 sock: socket.socket | None = None,
                 puback: LatencyHistogram | None = None) -> None:
        self._runner = web.AppRunner(build_app(snapshot, devices, puback, host), access_log=None,
                                     handle_signals=False)
        self.host = host
        self.port = port
        self._sock = sock

    async def start(self) -> None:
        await self._runner.setup()
        if self._sock is not None:
            await web.SockSite(self._runner, self._sock).start()
        else:
            await web.TCPSite(self._runner, self.host, self.port, reuse_address=True).start()
        self.host, self.port = self._runner.addresses[0][:2]
        log.info("mqtt-bridge admin API on http://%s:%d (metrics at /metrics)", self.host,
                 self.port, extra={"event": "admin_listening", "port": self.port})

    async def close(self) -> None:
        await self._runner.cleanup()
