"""MQTT over WebSockets (MQTT 5.0 section 6, 3.1.1 section 6): a browser's way in.

The WebSocket is adapted to the byte-stream ``asyncio.Transport`` interface the TCP
listener hands to :class:`~mqtt_bridge.connection.Connection`, so the same connection,
session and protocol code serves both: binary messages become ``data_received`` calls
(MQTT packets need not align with WebSocket messages, the packet reader reassembles),
and each batch the connection writes goes out as one binary message. aiohttp does the
HTTP upgrade, framing, masking and ping/pong. TLS (``--wss-listen``) runs its handshake
through ``commonlib.tls_accept`` like the MQTT TLS listener, so failed
handshakes are logged (rate-limited) and counted in ``mqtt_tls_handshake_failures_total``
too (aiohttp's own TLS site drops them silently).

Rules from the specifications: the client must offer the subprotocol ``mqtt`` (an
upgrade without it is refused with HTTP 400 and counted), and a text message closes
the connection (WebSocket close 1003).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from aiohttp import WSCloseCode, WSMsgType, web

from commonlib.tls_accept import HandshakeFailures, tls_accepting

from .config import BridgeConfig
from .connection import Connection
from .ws_origin import OriginCheck

log = logging.getLogger(__name__)

SUBPROTOCOL = "mqtt"
PATHS = ("/mqtt", "/")
_HIGH_WATER = 256 * 1024


def offered_subprotocols(header: str) -> list[str]:
    """The client's ``Sec-WebSocket-Protocol`` list (comma separated, may repeat)."""
    return [p.strip() for p in header.split(",") if p.strip()]


class WebSocketTransport(asyncio.Transport):
    """One WebSocket seen as a byte stream by the MQTT connection.

    Writes are queued and sent in order by one writer task; above the high-water mark
    the protocol's ``pause_writing`` is called, as a socket transport would.
    ``pause_reading`` stops taking messages off the WebSocket (aiohttp then stops
    reading the socket, so TCP flow control reaches the client).
    """

    def __init__(self, ws: web.WebSocketResponse, request: web.Request, protocol: Connection) -> None:
        super().__init__()
        self._ws = ws
        self._request = request
        self._protocol = protocol
        self._pending: deque[bytes] = deque()
        self._buffered = 0
        self._high = _HIGH_WATER
        self._low = _HIGH_WATER // 4
        self._paused = False
        self._closing = False
        self._wake = asyncio.Event()
        self.reading = asyncio.Event()
        self.reading.set()
        #: the WebSocket close code the writer sends when it is done
        self.close_code: int = WSCloseCode.OK
        self.close_message = b""

    # ---- asyncio.Transport ---------------------------------------------------------
    def get_extra_info(self, name: str, default: Any = None) -> Any:
        inner = self._request.transport
        return default if inner is None else inner.get_extra_info(name, default)

    def is_closing(self) -> bool:
        return self._closing

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._high = _HIGH_WATER if high is None else high
        self._low = self._high // 4 if low is None else low

    def get_write_buffer_size(self) -> int:
        return self._buffered

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writelines([data])

    def writelines(self, list_of_data: Iterable[bytes | bytearray | memoryview]) -> None:
        if self._closing:
            return
        data = b"".join(list_of_data)
        if not data:
            return
        self._pending.append(data)
        self._buffered += len(data)
        self._wake.set()
        if not self._paused and self._buffered > self._high:
            self._paused = True
            self._protocol.pause_writing()

    def pause_reading(self) -> None:
        self.reading.clear()

    def resume_reading(self) -> None:
        self.reading.set()

    def is_reading(self) -> bool:
        return self.reading.is_set()

    def close(self) -> None:
        """Send what is queued, then a WebSocket close (1000)."""
        self._closing = True
        self._wake.set()
        self.reading.set()

    def discard(self) -> None:
        """Drop what is queued and stop: the handler closes the WebSocket itself."""
        self._closing = True
        self._pending.clear()
        self._buffered = 0
        self._wake.set()
        self.reading.set()

    def abort(self) -> None:
        self.discard()
        inner = self._request.transport
        if inner is not None:
            inner.abort()

    # ---- the writer task -----------------------------------------------------------
    async def write_loop(self) -> None:
        ws = self._ws
        with contextlib.suppress(ConnectionError, RuntimeError):
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._pending:
                    data = self._pending.popleft()
                    await ws.send_bytes(data)
                    self._buffered -= len(data)
                    if self._paused and self._buffered <= self._low:
                        self._paused = False
                        self._protocol.resume_writing()
                if self._closing:
                    await ws.close(code=self.close_code, message=self.close_message)
                    return


class WebSocketListener:
    """An aiohttp server that upgrades ``/mqtt`` and ``/`` to MQTT connections."""

    #: The listener name in failed-handshake log lines and counts.
    TLS_LISTENER = "MQTT-WSS"

    def __init__(self, config: BridgeConfig, new_connection: Callable[[bool], Connection],
                 refused: Callable[[], None], *, ssl_context: ssl.SSLContext | None = None,
                 tls_failures: HandshakeFailures | None = None,
                 handshake_timeout_s: float | None = None) -> None:
        self._config = config
        #: a new connection (its argument: over TLS?), and the count of refused upgrades
        self._new_connection = new_connection
        self._refused = refused
        self.ssl_context = ssl_context
        self.port = 0
        self._tls_failures = tls_failures or HandshakeFailures()
        self._handshake_timeout_s = handshake_timeout_s
        self._tls_server: asyncio.AbstractServer | None = None
        self._close_handshakes: Callable[[], None] | None = None
        cfg = config
        self.origins = OriginCheck(cfg.ws_allowed_origins,
                                   [h for h in (cfg.host, cfg.ws_host, cfg.wss_host) if h])
        app = web.Application()
        for path in PATHS:
            app.router.add_get(path, self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)

    async def start(self, host: str, port: int) -> None:
        await self._runner.setup()
        if self.ssl_context is not None:
            await self._start_tls(host, port)
            return
        site = web.TCPSite(self._runner, host, port, ssl_context=self.ssl_context, backlog=4096,
                           reuse_address=True)
        await site.start()
        server = site._server  # noqa: SLF001 - aiohttp exposes the bound port nowhere else
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else port

    async def _start_tls(self, host: str, port: int) -> None:
        """aiohttp's request handlers behind our own TLS accept (see the module doc)."""
        server, context = self._runner.server, self.ssl_context
        assert server is not None and context is not None  # set up above; wss only
        factory, self._close_handshakes = tls_accepting(
            server, context, self.TLS_LISTENER, self._tls_failures, self._handshake_timeout_s)
        self._tls_server = await asyncio.get_running_loop().create_server(
            factory, host, port, backlog=4096, reuse_address=True)
        self.port = self._tls_server.sockets[0].getsockname()[1]

    def close(self) -> None:
        """Nothing yet: the upgraded connections end with aiohttp's runner (``stop``)."""

    async def stop(self) -> None:
        if self._tls_server is not None:
            self._tls_server.close()
        if self._close_handshakes is not None:
            self._close_handshakes()
        await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        offered = offered_subprotocols(request.headers.get("Sec-WebSocket-Protocol", ""))
        if SUBPROTOCOL not in offered:
            self._refused()
            log.warning("refusing WebSocket from %s: subprotocol %r, not %r",
                        request.remote, offered, SUBPROTOCOL,
                        extra={"event": "ws_refused", "reason": "subprotocol"})
            return web.Response(status=400, text=f"WebSocket subprotocol '{SUBPROTOCOL}' required\n")
        origin = request.headers.get("Origin")
        if not self.origins.permits(origin, request.headers.get("Host")):
            self._refused()
            log.warning("refusing WebSocket from %s: page origin %r not allowed (--ws-allowed-origin)",
                        request.remote, origin, extra={"event": "ws_refused", "reason": "origin"})
            return web.Response(status=403, text="origin not allowed (--ws-allowed-origin)\n")
        cfg = self._config
        ws = web.WebSocketResponse(protocols=(SUBPROTOCOL,), compress=False, autoping=True,
                                   max_msg_size=cfg.max_packet_size + 65536)
        await ws.prepare(request)
        conn = self._new_connection(self.ssl_context is not None)
        transport = WebSocketTransport(ws, request, conn)
        conn.connection_made(transport)
        writer = asyncio.get_running_loop().create_task(transport.write_loop())
        reason: Exception | None = None
        try:
            while not transport.is_closing():
                await transport.reading.wait()
                if transport.is_closing():
                    break
                msg = await ws.receive()
                if msg.type == WSMsgType.BINARY:
                    conn.data_received(msg.data)
                elif msg.type == WSMsgType.TEXT:
                    log.warning("closing WebSocket from %s: text message (MQTT needs binary)",
                                request.remote)
                    transport.close_code = WSCloseCode.UNSUPPORTED_DATA
                    transport.close_message = b"MQTT needs binary messages"
                    transport.discard()
                    break
                else:  # CLOSE, CLOSING, CLOSED, ERROR
                    if msg.type == WSMsgType.ERROR:
                        error = ws.exception()
                        reason = error if isinstance(error, Exception) else None
                    break
        finally:
            if not transport.is_closing():
                transport.close()
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(writer, 5.0)
            writer.cancel()
            conn.connection_lost(reason)
        return ws
