"""One asyncio protocol per client connection: thin glue around ``logserver.framing``.

Framing and response order live in the sans-I/O :class:`~logserver.framing.ServerFraming`.
Here: each request's synchronous part runs on arrival, in arrival order (so appends keep
the producer's order); responses that must wait (long-poll fetch, fsync before ack) are
futures; the responses ready in one loop turn go out in one socket write; record bytes of
fetch responses go from the segment file to the socket with sendfile (on TLS connections,
where the kernel cannot encrypt, they are read and written in chunks instead). Each fetch
slice is released once sent or dropped, which lets its segment file go. What a connection
may send before it has authenticated is :mod:`logserver.security.session`'s business.

Back-pressure: a frame is dispatched only while the connection is not backlogged (its
transport's buffer under the high-water mark, fewer than ``queued.max.requests``
responses waiting or queued behind a sendfile); frames read but not dispatched wait,
and reading pauses. So a client that never reads its responses holds at most one
response beyond the transport's buffer, however many requests it pipelines. Each
frame's size is reserved in the broker-wide ``queued.max.request.bytes`` budget
(:mod:`logserver.request_budget`) until its response is complete.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, cast

from commonlib.tls_accept import HandshakeFailures
from kafkaproto import FileRegion, RequestHeader, encode_response
from logserver.close_connection import CloseConnection
from logserver.framing import ServerFraming, Slot
from logserver.latency import RequestMetrics
from logserver.request_budget import RequestBudget
from logserver.security.session import RAW_TOKEN, ConnectionSecurity
from logserver.security.tls import subject_dn

if TYPE_CHECKING:
    from logserver.dispatch import Dispatcher
    from logserver.limits import ConnectionLimiter
    from logserver.security.listeners import ListenerSecurity

log = logging.getLogger(__name__)

STAGING_BYTES = 32 * 1024  # per connection: 1,000 idle clients cost 32 MB, not 256 MB
# Below this, reading the region and writing it with the header is cheaper than a
# separate sendfile call (which must wait for the socket buffer to drain first).
SENDFILE_MIN_BYTES = 64 * 1024
TLS_CHUNK_BYTES = 256 * 1024  # record bytes read per write on a TLS connection
# After a failed authentication's answer, the connection is closed this much later (it reads
# nothing more meanwhile), so clients that see the close before the data still read why.
AUTH_FAILURE_CLOSE_SECONDS = 0.5


class RecordSlice(Protocol):
    """What the network needs of a fetch's record bytes (logserver.log.SegmentSlice).

    The storage keeps its descriptors to itself: the connection asks the slice to read
    or sendfile itself, and releases it once, on every path.
    """

    length: int

    def read(self, start: int = 0, size: int | None = None) -> bytes: ...

    def sendfile_to(self, socket_fd: int, start: int, count: int) -> int: ...

    def release(self) -> None: ...


async def _sendfile(loop: asyncio.AbstractEventLoop, transport: asyncio.Transport,
                    region: RecordSlice) -> int:
    """os.sendfile of a slice straight to the transport's socket, after what it holds.

    Bytes queued in the transport (the response header) must leave first, so sendfile
    only runs when that buffer is empty; when the socket is full, a dup of its
    descriptor waits for writability (the loop refuses a writer on a descriptor its
    transport owns). The same path serves every event loop (uvloop has no
    loop.sendfile). Returns the bytes sent (fewer than the slice: its file ended early).
    """
    sock_fd = transport.get_extra_info("socket").fileno()
    count = region.length
    sent = 0
    waiter_fd = -1
    try:
        while sent < count:
            if transport.is_closing():
                raise ConnectionResetError("connection closed during sendfile")
            if transport.get_write_buffer_size() == 0:
                try:
                    n = region.sendfile_to(sock_fd, sent, count - sent)
                except BlockingIOError:
                    n = -1
                if n == 0:
                    break  # the file ends before the region does
                if n > 0:
                    sent += n
                    continue
            if waiter_fd < 0:
                waiter_fd = os.dup(sock_fd)
            writable = loop.create_future()
            loop.add_writer(waiter_fd, _set_done, writable)
            try:
                await writable
            finally:
                loop.remove_writer(waiter_fd)
    finally:
        if waiter_fd >= 0:
            os.close(waiter_fd)
    return sent


def _set_done(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class ConnectionStats:
    """Counters shared by every connection, for logs and tests."""

    def __init__(self) -> None:
        self.connections: set[KafkaConnection] = set()
        self.open_connections = 0
        self.requests = 0
        self.sendfile_calls = 0
        self.sendfile_bytes = 0
        self.protocol_errors = 0
        self.request_metrics = RequestMetrics()  # per API: count and latency (admin /metrics)
        self.limiter: ConnectionLimiter | None = None  # set by the server (logserver.limits)
        self.budget = RequestBudget(None)  # queued.max.request.bytes; set by the server
        self.tls_failures = HandshakeFailures()  # failed TLS handshakes (commonlib.tls_accept)

    @property
    def in_flight(self) -> int:
        return sum(connection.in_flight for connection in self.connections)

    def close_all(self) -> None:
        for connection in list(self.connections):
            connection.close()


class KafkaConnection(asyncio.BufferedProtocol):
    """asyncio glue around :class:`ServerFraming`: reads, dispatch, writes, sendfile.

    Responses that become ready in the same loop turn leave in one socket write.
    Compact on purpose (``__slots__``, lists rather than deques, no input buffer while
    idle): a server holds thousands of these for clients that mostly wait.
    """

    __slots__ = ("_dispatcher", "_stats", "_max_queued", "_max_request_bytes", "_framing",
                 "_listener", "security", "_tls", "_drained", "_auth_failed", "_pending",
                 "_drain_scheduled", "_writable", "_futures", "_flush_scheduled", "_out",
                 "_writer", "_transport", "_reading_paused", "_writing_paused", "_closed",
                 "peer", "_admitted_ip", "last_active")

    def __init__(self, dispatcher: Dispatcher, stats: ConnectionStats,
                 listener: ListenerSecurity | None = None) -> None:
        self._dispatcher = dispatcher
        self._stats = stats
        self._max_queued = dispatcher.config["queued.max.requests"]
        self._max_request_bytes: int = dispatcher.config["socket.request.max.bytes"]
        self._framing: ServerFraming[bytes | FileRegion] = ServerFraming(
            self._max_request_bytes, STAGING_BYTES, stats.budget)
        self._listener = listener
        self.security: ConnectionSecurity | None = None
        self._tls = False  # sendfile cannot go through TLS: record bytes are read and written
        self._drained: asyncio.Future[None] | None = None
        self._auth_failed = False  # answered, reads nothing more, closes soon
        self._pending: list[bytearray] = []  # read, not dispatched yet (back-pressure)
        self._drain_scheduled = False
        self._writable: asyncio.Future[None] | None = None
        self._futures: set[asyncio.Future[Any]] | None = None  # a set while any is pending
        self._flush_scheduled = False
        self._out: list[bytes | FileRegion] = []  # behind a sendfile in progress
        self._writer: asyncio.Task[None] | None = None
        self._transport: asyncio.Transport | None = None
        self._reading_paused = False
        self._writing_paused = False
        self._closed = False
        self.peer = "?"
        self._admitted_ip: str | None = None
        self.last_active = time.monotonic()  # for connections.max.idle.ms

    # -- asyncio protocol callbacks -------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, only look-alikes.
        tcp: asyncio.Transport = transport  # type: ignore[assignment]  # structurally one
        self._transport = tcp
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        limiter = self._stats.limiter
        if limiter is not None:
            ip = peer[0] if peer else "?"
            if not limiter.admit(ip):  # logged by the limiter; Kafka also just closes
                self._closed = True
                tcp.abort()
                return
            self._admitted_ip = ip
        self._stats.open_connections += 1
        self._stats.connections.add(self)
        self._tls = transport.get_extra_info("ssl_object") is not None
        if self._listener is not None:
            dn = subject_dn(transport.get_extra_info("peercert")) if self._tls else None
            self.security = ConnectionSecurity(self._listener, dn)
            self._framing.max_request_bytes = self.security.max_frame_bytes(self._max_request_bytes)
        log.debug("connection from %s", self.peer)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._admitted_ip is None and self._stats.limiter is not None:
            return  # refused on accept: never counted in
        if self._admitted_ip is not None and self._stats.limiter is not None:
            self._stats.limiter.release(self._admitted_ip)
        self._stats.open_connections -= 1
        self._stats.connections.discard(self)
        futures, self._futures = self._futures, None
        for future in futures or ():
            future.cancel()  # their done callbacks release their request bytes
        budget = self._stats.budget
        budget.forget(self)
        pending, self._pending = self._pending, []
        for frame in pending:
            budget.release(len(frame))
        _release_all(self._framing.held_output())
        self._framing.close()
        self._drop_out()
        if self._writer is not None:
            self._writer.cancel()
        log.debug("connection from %s closed", self.peer)

    @property
    def in_flight(self) -> int:
        return (self._framing.waiting + len(self._out) + self._framing.has_output
                + len(self._pending))

    def close(self) -> None:
        if self._transport is not None and not self._closed:
            self._closed = True
            self._transport.close()

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._update_reading()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._framing.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active = time.monotonic()
        framing = self._framing
        self._pending.extend(framing.buffer_updated(nbytes))
        self._dispatch_pending()
        if self._closed:
            return
        if framing.failed is not None:
            self._protocol_error(framing.failed)
            return
        if framing.blocked:
            self._stats.budget.wait(self, self._budget_freed)
        self._write_ready()

    def _dispatch_pending(self) -> None:
        """Dispatch the frames read so far, in order, while the connection is not backlogged."""
        self._drain_scheduled = False
        pending = self._pending
        while pending and not self._closed and not self._backlogged():
            self._handle_frame(pending.pop(0))

    def _budget_freed(self) -> None:
        """queued.max.request.bytes has room again: take the frame that was refused."""
        if self._closed:
            return
        self._pending.extend(self._framing.unblock())
        if self._framing.blocked:
            self._stats.budget.wait(self, self._budget_freed)
        self._schedule_drain()

    def _schedule_drain(self) -> None:
        if not self._drain_scheduled:
            self._drain_scheduled = True
            asyncio.get_running_loop().call_soon(self._drain)

    def _drain(self) -> None:
        self._dispatch_pending()
        if not self._closed:
            self._write_ready()

    def eof_received(self) -> bool:
        return False

    def _close_for(self, header: RequestHeader, close: CloseConnection) -> None:
        """A handler asked for the connection to close instead of an answer (Kafka: acks=0
        produce errors); what was already written still leaves, at info like Kafka."""
        log.info("closing connection from %s (client id %r) after request %d: %s", self.peer,
                 header.client_id, header.correlation_id, close.reason)
        if self._transport is not None and not self._closed:
            self._write_ready()
            self._closed = True
            self._transport.close()

    def _protocol_error(self, reason: str) -> None:
        self._stats.protocol_errors += 1
        log.warning("closing connection from %s: %s", self.peer, reason)
        self._closed = True
        if self._transport is not None:
            self._transport.abort()

    # -- requests and responses -------------------------------------------------------

    def _handle_frame(self, frame: bytearray) -> None:
        self._stats.requests += 1
        size = len(frame)  # reserved in queued.max.request.bytes until answered
        started = time.perf_counter()
        try:
            outcome = self._dispatcher.dispatch(frame, self.peer, self.security)
        except Exception as exc:  # a bug in a handler must not kill the other clients
            self._stats.budget.release(size)
            log.exception("request from %s failed", self.peer)
            self._protocol_error(f"internal error: {exc!r}")
            return
        if outcome is None:
            self._stats.budget.release(size)
            return  # acks=0 produce: no response at all
        header, result = outcome
        if header is None:
            self._stats.budget.release(size)
            self._protocol_error(str(result))
            return
        if isinstance(result, CloseConnection):
            self._stats.budget.release(size)
            self._close_for(header, result)
            return
        if isinstance(result, Awaitable):
            future = asyncio.ensure_future(result)
            if self._futures is None:
                self._futures = set()
            self._futures.add(future)
            self._stats.request_metrics.wait_started(header.api_key)
            future.add_done_callback(functools.partial(
                self._on_response_ready, self._framing.reserve(), header, size, started))
            self._update_reading()
        else:
            try:
                encoded = _encode(header, result)
            except Exception as exc:  # a response a handler built wrong: this client only
                self._stats.budget.release(size)
                log.exception("encoding the response to %s from %s failed", header, self.peer)
                self._protocol_error(f"internal error: {exc!r}")
                return
            self._framing.respond(encoded)
            self._stats.budget.release(size)
            self._stats.request_metrics.observe(header.api_key, time.perf_counter() - started)

    def _on_response_ready(self, slot: Slot[bytes | FileRegion], header: RequestHeader,
                           size: int, started: float, future: asyncio.Future[Any]) -> None:
        self._stats.budget.release(size)
        if self._futures is not None:
            self._futures.discard(future)
            if not self._futures:
                self._futures = None
        self._stats.request_metrics.wait_ended(header.api_key)
        self._stats.request_metrics.observe(header.api_key, time.perf_counter() - started)
        if future.cancelled():
            return
        if self._closed:
            if future.exception() is None:
                _release_response(header, future.result())
            return
        error = future.exception()
        if error is not None:
            log.error("request %s from %s failed", header, self.peer, exc_info=error)
            self._protocol_error(f"internal error: {error!r}")
            return
        result = future.result()
        if isinstance(result, CloseConnection):
            self._close_for(header, result)
            return
        try:
            encoded = None if result is None else _encode(header, result)
        except Exception as exc:  # a response a handler built wrong: this client only
            log.exception("encoding the response to %s from %s failed", header, self.peer)
            self._protocol_error(f"internal error: {exc!r}")
            return
        self._framing.complete(slot, encoded)
        if self._framing.has_output and not self._flush_scheduled:
            # Responses completed in this loop turn leave together, in one write.
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._write_ready)
        self._update_reading()

    def _write_ready(self) -> None:
        """Writes every response that may leave now, then decides again whether to read.

        The second step is what keeps a connection alive: responses that became ready
        together (a parked Fetch answered, the large Metadata queued behind it) count
        against the high-water mark until they are written (:meth:`_backlogged`), so
        reading may have paused for them. Once they are the transport's, the transport
        says when it is full (pause_writing/resume_writing); when it takes them all at
        once it says nothing, and only this re-check resumes reading.
        """
        self._flush_scheduled = False
        self._send_ready()
        self._update_reading()

    def _send_ready(self) -> None:
        """Hands every response that may leave now to the transport: bytes joined, big
        regions by sendfile (behind the writer task)."""
        security = self.security
        if security is not None and not self._closed:
            self._framing.max_request_bytes = security.max_frame_bytes(self._max_request_bytes)
            if security.failed and self._framing.waiting == 0:
                # Kafka closes a connection whose authentication failed, after the reply.
                # Only SASL and ApiVersions answers can be pending here: bytes, no regions.
                self._write_parts([c for c in self._framing.take_output() if isinstance(c, bytes)])
                if not self._auth_failed:
                    self._auth_failed = True
                    self._update_reading()
                    asyncio.get_running_loop().call_later(AUTH_FAILURE_CLOSE_SECONDS, self.close)
                return
        if self._closed:
            _release_all(self._framing.take_output())
            return
        chunks = self._framing.take_output()
        if not chunks:
            return
        if self._writer is not None:
            self._out.extend(chunks)  # they leave after the sendfile in progress
            self._update_reading()
            return
        parts: list[bytes] = []
        for index, chunk in enumerate(chunks):
            if isinstance(chunk, FileRegion):
                region = cast(RecordSlice, chunk)
                if region.length >= (TLS_CHUNK_BYTES if self._tls else SENDFILE_MIN_BYTES):
                    self._write_parts(parts)  # what precedes the region leaves first
                    self._out.extend(chunks[index:])
                    self._writer = asyncio.ensure_future(self._write_out())
                    return
                data = self._read_inline(region)
                if data is None:
                    _release_all(chunks[index + 1:])
                    return
                chunk = data
            parts.append(chunk)
        self._write_parts(parts)

    def _write_parts(self, parts: list[bytes]) -> None:
        transport = self._transport
        assert transport is not None
        if len(parts) == 1:
            transport.write(parts[0])
        elif parts:
            transport.write(b"".join(parts))
        parts.clear()

    def _read_inline(self, region: RecordSlice) -> bytes | None:
        """A small region's bytes, to go out with the header in one write; releases it."""
        try:
            data = region.read()
        finally:
            region.release()
        if len(data) != region.length:
            self._protocol_error(f"segment shrank under a fetch ({len(data)} of {region.length} bytes)")
            return None
        return data

    def _drop_out(self) -> None:
        """Forget every queued chunk, releasing the record slices among them."""
        out, self._out = self._out, []
        _release_all(out)

    async def _write_out(self) -> None:
        transport = self._transport
        assert transport is not None
        loop = asyncio.get_running_loop()
        try:
            while self._out and not self._closed:
                chunk = self._out.pop(0)
                self._update_reading()
                if isinstance(chunk, FileRegion):
                    region = cast(RecordSlice, chunk)
                    if self._tls and region.length >= TLS_CHUNK_BYTES:
                        try:
                            if not await self._write_region_in_chunks(region):
                                return
                        finally:
                            region.release()
                        continue
                    if region.length >= SENDFILE_MIN_BYTES:
                        try:
                            sent = await _sendfile(loop, transport, region)
                        finally:
                            region.release()
                        self._stats.sendfile_calls += 1
                        self._stats.sendfile_bytes += sent
                        if sent != region.length:
                            self._protocol_error("segment shrank under a fetch")
                            return
                        continue
                    data = self._read_inline(region)
                    if data is None:
                        return
                    chunk = data
                if self._writing_paused:  # a client that does not read: hold the rest here
                    self._writable = loop.create_future()
                    await self._writable
                    if self._closed:
                        return
                transport.write(chunk)
                self.last_active = time.monotonic()
        except (ConnectionError, OSError) as exc:
            log.debug("write to %s failed: %s", self.peer, exc)
            if not self._closed and self._transport is not None:
                self._transport.abort()
        finally:
            self._writer = None
            if self._closed:
                self._drop_out()

    async def _write_region_in_chunks(self, region: RecordSlice) -> bool:
        """A region read and written piece by piece (TLS), waiting while the socket is
        full, so a large fetch never sits in memory whole. False: the connection is gone."""
        transport = self._transport
        assert transport is not None
        sent = 0
        while sent < region.length:
            if self._closed:
                return False
            if self._writing_paused:
                self._drained = asyncio.get_running_loop().create_future()
                await self._drained
                continue
            data = region.read(sent, min(TLS_CHUNK_BYTES, region.length - sent))
            if not data:
                self._protocol_error("segment shrank under a fetch")
                return False
            transport.write(data)
            sent += len(data)
        self.last_active = time.monotonic()
        return True

    def _update_reading(self) -> None:
        if self._transport is None or self._closed:
            return
        # Responses streamed by sendfile leave the transport's buffer empty, so the chunks
        # queued behind the writer count too: a client that reads nothing stalls itself.
        backlogged = self._backlogged()
        if self._pending and not backlogged:
            self._schedule_drain()
        should_pause = (self._auth_failed or backlogged or bool(self._pending)
                        or self._framing.blocked)
        if should_pause and not self._reading_paused:
            self._reading_paused = True
            self._transport.pause_reading()
        elif not should_pause and self._reading_paused:
            self._reading_paused = False
            self._transport.resume_reading()


    def _backlogged(self) -> bool:
        """Too much is waiting to be sent to this client to dispatch another request:
        responses ready or in the transport's buffer up to its high-water mark (so a
        client that does not read pins one response beyond it), or queued.max.requests
        responses not sent yet."""
        if self._writing_paused or self._framing.waiting >= self._max_queued \
                or len(self._out) >= self._max_queued:
            return True
        transport = self._transport
        if transport is None:
            return False
        queued = self._framing.ready_bytes + transport.get_write_buffer_size()
        return queued >= transport.get_write_buffer_limits()[1]


def _encode(header: RequestHeader, body: Any) -> list[bytes | FileRegion]:
    if header is RAW_TOKEN:  # a bare SASL token (legacy framing after SaslHandshake v0)
        return [len(body).to_bytes(4, "big") + body]
    return encode_response(header.api_key, header.api_version, header.correlation_id, body)


def _release_response(header: RequestHeader, body: Any) -> None:
    """Release the record slices of a response that will never be sent."""
    if body is None:
        return
    try:
        chunks = _encode(header, body)
    except Exception:  # noqa: BLE001 - unsendable anyway; the slices' finalizers release them
        return
    _release_all(chunks)


def _release_all(chunks: Iterable[bytes | FileRegion]) -> None:
    for chunk in chunks:
        if isinstance(chunk, FileRegion):
            chunk.release()


def connection_factory(dispatcher: Dispatcher, stats: ConnectionStats,
                       listener: ListenerSecurity | None = None) -> Callable[[], KafkaConnection]:
    return lambda: KafkaConnection(dispatcher, stats, listener)
