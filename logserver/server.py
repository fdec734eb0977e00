"""Start-up and shutdown: bind the listeners, serve, and stop cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence

from commonlib.tls_accept import tls_accepting
from logserver.admin.http import AdminServer
from logserver.admin.state import AdminState
from logserver.bridge_process import BridgeSupervisor
from logserver.broker import Broker
from logserver.config import Config, ConfigError
from logserver.descriptor_budget import file_handles_allowed, raise_nofile_limit
from logserver.dispatch import Dispatcher
from logserver.gc_pause import gc_paused
from logserver.limits import ConnectionLimiter, reap_idle_connections
from logserver.network import ConnectionStats, connection_factory
from logserver.request_budget import RequestBudget
from logserver.rest.app import RestProxyServer
from logserver.security.listeners import ListenerSecurity, https_context, listener_security

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_SECONDS = 5.0


async def run_server(config: Config, ready: asyncio.Event | None = None,
                     stop: asyncio.Event | None = None, mqtt_bridge: str | None = None,
                     bridge_args: Sequence[str] = ()) -> None:
    """Serve until SIGTERM/SIGINT (or ``stop``); ``mqtt_bridge``: also supervise a bridge
    listening there, started with ``bridge_args`` (e.g. the server's log format)."""
    loop = asyncio.get_running_loop()
    security = listener_security(config)  # ConfigError before anything is opened
    rest_tls = https_context(config, config["rest.proxy.listeners"])
    bridge_target = _bridge_listener(config, security) if mqtt_bridge is not None else None
    config = _within_descriptor_limit(config)
    stats = ConnectionStats()
    admin_state = AdminState(stats, started_at=time.monotonic(),
                             bridge_admin_url=config["admin.mqtt.bridge.url"])
    admin = AdminServer(admin_state, config["admin.listeners"], config["admin.allowed.hosts"],
                        config["admin.require.auth"])
    await admin.start()  # /v1/status/ready says false while the data directory recovers
    try:
        # No codec is compiled ahead: each (API, version) is generated on its first request
        # (from kafkaproto's code cache when warm), so an idle server holds only the few
        # it used, not ~800 (about 9 MB; issue 27).
        broker = Broker(config)
        # Recovery off the loop, so the admin listener answers meanwhile.
        await loop.run_in_executor(None, _gc_paused_call, broker.open)
    except BaseException:
        await admin.close()
        raise
    admin_state.broker = broker
    held = sum(broker.storage.partition_count(name) or 0 for name in broker.storage.topic_names())
    if held > config["max.partitions"]:
        log.warning("the data directory holds %d partitions, more than max.partitions %d "
                    "(%s)", held,
                    config["max.partitions"], config.sources.get("max.partitions", "default"))
    # What start-up created lives as long as the process: keep it out of the cyclic
    # GC's full collections, which otherwise stop every thread to scan it.
    gc.freeze()
    # Let the loop take the GIL back from a busy storage worker within 1 ms, not 5.
    sys.setswitchinterval(0.001)
    stats.limiter = ConnectionLimiter(config)
    stats.budget = RequestBudget(config["queued.max.request.bytes"])
    background: list[asyncio.Task[None]] = []
    dispatcher = Dispatcher(broker)
    servers: list[asyncio.Server] = []
    handshakes: list[Callable[[], None]] = []
    bridge: BridgeSupervisor | None = None
    bridge_task: asyncio.Task[str | None] | None = None
    rest_proxy: RestProxyServer | None = None
    admin_sock: socket.socket | None = None
    stop = stop or asyncio.Event()
    try:
        ports = []
        for listener in config["listeners"]:
            secure = security[listener.name]
            factory: Callable[[], asyncio.BaseProtocol] = connection_factory(dispatcher, stats, secure)
            if secure.ssl_context is not None:  # handshakes run by hand: failures are seen
                factory, close_handshakes = tls_accepting(
                    factory, secure.ssl_context, listener.name, stats.tls_failures)
                handshakes.append(close_handshakes)
            # Bound now (a port taken fails start-up at once, and port 0 is resolved for
            # the cluster registration) but not listening: connections are refused until
            # the broker is ready, in cluster mode until it has joined (Kafka opens its
            # listeners only then), so no client sees an answer from a broker outside it.
            server = await loop.create_server(factory, listener.host, listener.port,
                                              reuse_address=True, backlog=1024,
                                              start_serving=False)
            servers.append(server)
            ports.append(server.sockets[0].getsockname()[1])
        broker.config = config.with_bound_ports(ports)
        broker.admin_address = admin.addresses[0] if admin.addresses else None
        await broker.start()
        # Before the Kafka listeners serve: whoever sees the broker accept (clients,
        # supervisors, tests) finds the REST Proxy bound too.
        rest_proxy = RestProxyServer(broker, config["rest.proxy.listeners"],
                                     auth_required=_authenticates(broker, security),
                                     ssl_context=rest_tls)
        await rest_proxy.start()
        for server in servers:
            await server.start_serving()
        background.append(loop.create_task(
            reap_idle_connections(stats.connections, config["connections.max.idle.ms"])))
        for listener in broker.config["listeners"]:
            log.info("listening on %s:%d (%s, %s)", listener.host, listener.port, listener.name,
                     security[listener.name].protocol)
        admin.log_addresses()  # not before: a start-up that fails says one line only
        log.info("data in %s; durability: %s; event loop: %s", config.data_dir.resolve(),
                 broker.storage.durability_mode, type(loop).__module__.split(".")[0])
        if mqtt_bridge is not None:
            target = next(li for li in broker.config.advertised if li.name == bridge_target)
            host, port = target.host, target.port
            admin_sock = bridge_admin_socket(admin_state) if admin.addresses else None
            fds = () if admin_sock is None else (admin_sock.fileno(),)
            extra = () if admin_sock is None else ("--admin-fd", str(admin_sock.fileno()))
            bridge = BridgeSupervisor(mqtt_bridge, f"{host}:{port}", [*bridge_args, *extra],
                                      pass_fds=fds)
            bridge_task = loop.create_task(bridge.run())
            bridge_task.add_done_callback(lambda _: stop.set())  # it only ends by giving up
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        admin_state.serving = True
        if ready is not None:
            ready.set()
        await stop.wait()
        if broker.cluster is not None:  # leaderships move while clients can still ask us
            await broker.cluster.controlled_shutdown()
        log.info("shutting down: no new connections, finishing in-flight requests")
    finally:
        admin_state.stopping = True
        bridge_failure = None
        if bridge is not None and bridge_task is not None:
            await bridge.stop()
            bridge_failure = await bridge_task
        if admin_sock is not None:
            admin_sock.close()
        for task in background:
            task.cancel()
        for server in servers:
            server.close()
        if rest_proxy is not None:
            await rest_proxy.close()
        for close_handshakes in handshakes:
            close_handshakes()
        await broker.groups.close()  # parked joins are answered now, not at the grace limit
        await _wait_for_in_flight(stats)
        stats.close_all()
        await broker.close()
        await admin.close()
        log.info("served %d requests; %d connections closed for protocol errors; "
                 "sendfile: %d calls, %d bytes", stats.requests, stats.protocol_errors,
                 stats.sendfile_calls, stats.sendfile_bytes)
        log.info("stopped cleanly")
    if bridge_failure is not None:
        raise BridgeFailed(bridge_failure)


def _gc_paused_call(open_broker: Callable[[], None]) -> None:
    """Open the broker (every partition's objects) with the cyclic GC paused: see
    logserver.gc_pause; what it built is frozen right after (gc.freeze)."""
    with gc_paused():
        open_broker()


def _bridge_listener(config: Config, security: dict[str, ListenerSecurity]) -> str:
    """The listener the --mqtt-bridge child connects to: a PLAINTEXT one (the child is
    started without TLS or SASL settings)."""
    names = {li.name for li in config.advertised}
    for listener in config["listeners"]:
        if security[listener.name].protocol == "PLAINTEXT" and listener.name in names:
            return str(listener.name)
    raise ConfigError("--mqtt-bridge needs a PLAINTEXT listener on the loopback address to "
                      "reach the log server (e.g. add PLAINTEXT://127.0.0.1:9092 to listeners)")


def _authenticates(broker: Broker, security: dict[str, ListenerSecurity]) -> bool:
    """The REST Proxy asks for HTTP basic credentials when the Kafka listeners
    authenticate (SASL) or ACLs are on."""
    return broker.authorizer is not None or any(s.uses_sasl for s in security.values())


def bridge_admin_socket(admin_state: AdminState) -> socket.socket:
    """A loopback listening socket for the bridge child's admin API (``--admin-fd``): the
    dashboard reads its devices there. Held here, so it survives bridge restarts."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    admin_state.bridge_admin_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    return sock


class BridgeFailed(RuntimeError):
    """The ``--mqtt-bridge`` child cannot run (the reason is logged): exit non-zero."""


async def _wait_for_in_flight(stats: ConnectionStats) -> None:
    """Give requests already read a moment to be answered before the log closes."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SHUTDOWN_GRACE_SECONDS
    await asyncio.sleep(0)
    while stats.in_flight > 0 and loop.time() < deadline:
        await asyncio.sleep(0.01)


def _within_descriptor_limit(config: Config) -> Config:
    """``log.file.handles.max`` no larger than the descriptor limit allows (see
    logserver.descriptor_budget), so segment files never exhaust the descriptors."""
    nofile = raise_nofile_limit()
    allowed = file_handles_allowed(nofile)
    configured = config["log.file.handles.max"]
    if 0 < configured <= allowed:
        return config
    if "log.file.handles.max" in config.sources:
        log.warning("log.file.handles.max %d does not fit the descriptor limit %d (ulimit -n) "
                    "beside the reserve for connections: using %d", configured, nofile, allowed)
    return config.replace(**{"log.file.handles.max": (
        allowed, f"derived from the descriptor limit {nofile} (ulimit -n)")})
