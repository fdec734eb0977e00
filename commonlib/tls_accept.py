"""TLS listeners that see their failed handshakes: logged (rate-limited) and counted.

``loop.create_server(..., ssl=context)`` (asyncio and uvloop alike) drops a connection
whose handshake fails without a word outside debug mode, so garbage on an SSL port, a
client that does not trust our certificate or one without the required certificate
would leave no trace. Here the listener accepts plain TCP and runs the handshake itself
(``loop.start_tls``): a failure becomes one log line naming the peer and the reason,
at most ``LOG_LINES`` lines per ``LOG_WINDOW_S`` (a flood is summed up, never written
out line by line), and a count per listener that /metrics exposes as Kafka's
``failed-authentication-total`` (an SSL handshake failure is an authentication failure
in Kafka too). Only TLS failures and handshake time-outs count; a peer that just
closes the connection is not an authentication attempt.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import ssl
import time
from collections.abc import Callable
from typing import cast

__all__ = ["HandshakeFailures", "tls_accepting"]

log = logging.getLogger(__name__)

LOG_LINES = 10  # failed handshakes logged per window; the rest are counted and summed up
LOG_WINDOW_S = 60.0
REASON = "ssl_handshake"


class HandshakeFailures:
    """Failed TLS handshakes per (listener, reason), and the rate limit of their log lines."""

    def __init__(self, lines: int = LOG_LINES, window_s: float = LOG_WINDOW_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.counts: collections.Counter[tuple[str, str]] = collections.Counter()
        self._lines = lines
        self._window_s = window_s
        self._clock = clock
        self._window_start = -window_s
        self._logged = 0
        self._unlogged = 0

    def record(self, listener: str, peer: str, error: BaseException) -> None:
        self.counts[(listener, REASON)] += 1
        now = self._clock()
        if now - self._window_start >= self._window_s:
            self._window_start, self._logged = now, 0
        if self._logged >= self._lines:
            self._unlogged += 1
            return
        self._logged += 1
        more = (f" ({self._unlogged} more failed handshakes were not logged)"
                if self._unlogged else "")
        self._unlogged = 0
        log.warning("failed TLS handshake on listener %s from %s: %s%s", listener, peer,
                    describe(error), more)


def describe(error: BaseException) -> str:
    """One line for a handshake failure: OpenSSL's reason code when it gave one."""
    if isinstance(error, ssl.SSLError) and error.reason:
        return error.reason
    return str(error) or type(error).__name__


def counts_as_failure(error: BaseException) -> bool:
    """TLS errors and handshake time-outs (ConnectionAbortedError from start_tls)."""
    return isinstance(error, (ssl.SSLError, ConnectionAbortedError, TimeoutError))


class _Gate(asyncio.BufferedProtocol):
    """The application side while the handshake runs: start_tls returns only after the
    first records may already have been decrypted, so they are held here until the
    listener's own protocol takes over."""

    def __init__(self) -> None:
        self.held = bytearray()
        self.eof = False
        self.lost = False
        self._buffer = bytearray(65536)

    def get_buffer(self, sizehint: int) -> memoryview:
        return memoryview(self._buffer)

    def buffer_updated(self, nbytes: int) -> None:
        self.held += self._buffer[:nbytes]

    def eof_received(self) -> bool:
        self.eof = True
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True


class _Handshaking(asyncio.Protocol):
    """Raw TCP until start_tls takes the transport over. uvloop starts reading right
    after connection_made, so the ClientHello may arrive here first: it is kept (reading
    paused) and handed to the TLS protocol before that starts its handshake."""

    def __init__(self, acceptor: _TlsAcceptor) -> None:
        self._acceptor = acceptor
        self.early = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        tcp: asyncio.Transport = transport  # type: ignore[assignment]  # uvloop: a look-alike
        tcp.pause_reading()  # asyncio honours this; uvloop starts reading anyway
        self.transport = tcp
        self._acceptor.start(tcp, self)

    def data_received(self, data: bytes) -> None:
        self.early += data
        if self.transport is not None:
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        return True  # the handshake then fails on the missing bytes, and says so


class _TlsAcceptor:
    def __init__(self, factory: Callable[[], asyncio.BaseProtocol], context: ssl.SSLContext,
                 listener: str, failures: HandshakeFailures, timeout_s: float | None) -> None:
        self._factory = factory
        self._context = context
        self._listener = listener
        self._failures = failures
        self._timeout_s = timeout_s
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, transport: asyncio.Transport, raw: _Handshaking) -> None:
        task = asyncio.get_running_loop().create_task(self._handshake(transport, raw))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handshake(self, transport: asyncio.Transport, raw: _Handshaking) -> None:
        peername = transport.get_extra_info("peername")
        peer = f"{peername[0]}:{peername[1]}" if peername else "?"
        gate = _Gate()
        loop = asyncio.get_running_loop()
        # Runs after start_tls has installed its protocol, before that protocol's
        # connection_made starts the handshake: the bytes read so far go in first.
        loop.call_soon(_hand_over_early_bytes, transport, raw)
        try:
            tls = await loop.start_tls(
                transport, gate, self._context, server_side=True,
                ssl_handshake_timeout=self._timeout_s)
        except asyncio.CancelledError:
            transport.abort()
            raise
        except Exception as exc:  # noqa: BLE001 - every failure closes this connection only
            transport.abort()
            if counts_as_failure(exc):
                self._failures.record(self._listener, peer, exc)
            else:
                log.debug("TLS connection from %s on %s closed during the handshake: %s",
                          peer, self._listener, describe(exc))
            return
        if tls is None or gate.lost:
            return
        app = self._factory()
        tls.set_protocol(app)
        app.connection_made(tls)
        if gate.held and not tls.is_closing():
            _feed(app, bytes(gate.held))
        if gate.eof and not tls.is_closing():
            keep_open = (app.eof_received()
                         if isinstance(app, (asyncio.Protocol, asyncio.BufferedProtocol)) else None)
            if not keep_open:
                tls.close()

    def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()


def _hand_over_early_bytes(transport: asyncio.Transport, raw: _Handshaking) -> None:
    protocol = transport.get_protocol()
    if raw.early and protocol is not raw and not transport.is_closing():
        _feed(protocol, bytes(raw.early))
        raw.early.clear()


def _feed(app: asyncio.BaseProtocol, data: bytes) -> None:
    if hasattr(app, "get_buffer"):  # uvloop's SSLProtocol only looks like a BufferedProtocol
        buffered = cast("asyncio.BufferedProtocol", app)
        view = memoryview(data)
        while view:
            buffer = memoryview(buffered.get_buffer(len(view)))
            n = min(len(buffer), len(view))
            buffer[:n] = view[:n]
            buffered.buffer_updated(n)
            view = view[n:]
    elif isinstance(app, asyncio.Protocol):
        app.data_received(data)


def tls_accepting(factory: Callable[[], asyncio.BaseProtocol], context: ssl.SSLContext,
                  listener: str, failures: HandshakeFailures, timeout_s: float | None = None,
                  ) -> tuple[Callable[[], asyncio.Protocol], Callable[[], None]]:
    """(protocol factory for a plain ``create_server``, close function cancelling the
    handshakes still running): ``factory``'s protocols get their connections after a
    successful TLS handshake with ``context``; failed ones go to ``failures``."""
    acceptor = _TlsAcceptor(factory, context, listener, failures, timeout_s)
    return (lambda: _Handshaking(acceptor)), acceptor.close
