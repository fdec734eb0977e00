"""Listeners: where devices connect (TCP, TLS, WebSocket, WebSocket over TLS).

Each kind of listener is behind one small interface (``Listener``): it accepts
connections and hands each one's byte stream to a new ``Connection`` through an
asyncio transport (a socket's own, or ``websocket.WebSocketTransport`` over WebSocket
messages), so the MQTT side never knows which one it is talking through.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable
from typing import Protocol

from commonlib.tls_accept import HandshakeFailures, tls_accepting

from .config import BridgeConfig
from .connection import Connection

log = logging.getLogger(__name__)

#: a new connection; its argument says whether it came over TLS
ConnectionFactory = Callable[[bool], Connection]


class CannotListen(OSError):
    """The MQTT port cannot be bound (taken, or not an address of this machine)."""


class Listener(Protocol):
    """One listening socket that turns accepted connections into ``Connection``s."""

    port: int

    async def start(self, host: str, port: int) -> None: ...

    def close(self) -> None:
        """Accept no more connections (the open ones stay)."""

    async def stop(self) -> None:
        """Release what is left, once the bridge has closed the connections."""


class StreamListener:
    """MQTT over TCP, or over TLS with the handshake run by hand so that failed ones are
    logged and counted (``commonlib.tls_accept``)."""

    def __init__(self, new_connection: ConnectionFactory, *, ssl_context: ssl.SSLContext | None = None,
                 tls_failures: HandshakeFailures | None = None, handshake_timeout_s: float | None = None,
                 reuse_port: bool = False) -> None:
        self._new_connection = new_connection
        self._ssl_context = ssl_context
        self._tls_failures = tls_failures or HandshakeFailures()
        self._handshake_timeout_s = handshake_timeout_s
        self._reuse_port = reuse_port
        self._server: asyncio.AbstractServer | None = None
        self._close_handshakes: Callable[[], None] = lambda: None
        self.port = 0

    async def start(self, host: str, port: int) -> None:
        loop = asyncio.get_running_loop()
        if self._ssl_context is not None:
            factory, self._close_handshakes = tls_accepting(
                lambda: self._new_connection(True), self._ssl_context, "MQTT-TLS",
                self._tls_failures, self._handshake_timeout_s)
            self._server = await loop.create_server(
                factory, host, port, backlog=4096, reuse_address=True,
                reuse_port=self._reuse_port or None)
        else:
            self._server = await loop.create_server(
                lambda: self._new_connection(False), host, port, backlog=4096, reuse_address=True,
                reuse_port=self._reuse_port or None,
            )
        self.port = self._server.sockets[0].getsockname()[1]

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        self._close_handshakes()

    async def stop(self) -> None:
        return None


class Listeners:
    """The bridge's listeners as configured; started in one go, closed in two steps."""

    def __init__(self, config: BridgeConfig, new_connection: ConnectionFactory, refused: Callable[[], None],
                 ssl_context: ssl.SSLContext | None) -> None:
        self._config = config
        self._new_connection = new_connection
        self._refused = refused
        self._ssl_context = ssl_context
        self.tls_failures = HandshakeFailures()  # failed TLS handshakes, logged rate-limited
        self.all: list[Listener] = []
        self.port = 0
        self.tls_port = 0

    async def start(self) -> None:
        """TLS, then plain TCP, then WebSocket and WebSocket over TLS, as configured."""
        cfg = self._config
        host, port = cfg.host, cfg.port
        try:
            if self._ssl_context is not None:
                host, port = cfg.tls_host or cfg.host, cfg.tls_port
                tls = StreamListener(self._new_connection, ssl_context=self._ssl_context,
                                     tls_failures=self.tls_failures,
                                     handshake_timeout_s=cfg.connect_timeout_s, reuse_port=cfg.reuse_port)
                self.all.append(tls)
                await tls.start(host, cfg.tls_port)
                self.tls_port = tls.port
                log.info(
                    "mqtt-bridge TLS listener on %s:%d (client certificates: %s)", host, self.tls_port,
                    "required" if cfg.require_certificate else "optional" if cfg.tls_cafile else "not asked",
                    extra={"event": "listening_tls", "port": self.tls_port},
                )
            if cfg.plaintext:
                host, port = cfg.host, cfg.port
                plain = StreamListener(self._new_connection, reuse_port=cfg.reuse_port)
                self.all.append(plain)
                await plain.start(cfg.host, cfg.port)
                self.port = plain.port
            for ws_host, ws_port, ctx in ((cfg.ws_host, cfg.ws_port, None),
                                          (cfg.wss_host, cfg.wss_port, self._ssl_context)):
                if ws_port is None:
                    continue
                host, port = ws_host or cfg.host, ws_port
                from .websocket import WebSocketListener  # aiohttp: 12 MB, loaded only here

                listener = WebSocketListener(cfg, self._new_connection, self._refused, ssl_context=ctx,
                                             tls_failures=self.tls_failures,
                                             handshake_timeout_s=cfg.connect_timeout_s)
                self.all.append(listener)
                await listener.start(host, port)
                log.info("mqtt-bridge WebSocket%s listener on %s:%d (subprotocol mqtt, /mqtt and /)",
                         " TLS" if ctx else "", host, listener.port,
                         extra={"event": "listening_wss" if ctx else "listening_ws", "port": listener.port})
        except OSError as exc:
            raise CannotListen(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc

    def close(self) -> None:
        """Accept no more connections."""
        for listener in self.all:
            listener.close()

    async def stop(self) -> None:
        for listener in self.all:
            with contextlib.suppress(Exception):
                await listener.stop()
