"""One asyncio protocol per client connection: framing, in-order responses, sendfile.

Frames are read into a reusable staging buffer; a frame too large for it gets a buffer of
its own that the socket fills directly, so a big produce request is copied once. Each
request's synchronous part runs on arrival, in arrival order (so appends keep the
producer's order); responses that must wait (long-poll fetch, fsync before ack) are
futures, and responses leave strictly in request order, as Kafka clients require.
Record bytes of fetch responses go from the segment file to the socket with sendfile.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kafkaproto import FileRegion, RequestHeader, encode_response

if TYPE_CHECKING:
    from logserver.dispatch import Dispatcher
    from logserver.limits import ConnectionLimiter

log = logging.getLogger(__name__)

STAGING_BYTES = 32 * 1024  # per connection: 1,000 idle clients cost 32 MB, not 256 MB
# Below this, reading the region and writing it with the header is cheaper than a
# separate sendfile call (which must wait for the socket buffer to drain first).
SENDFILE_MIN_BYTES = 64 * 1024
_SIZE = struct.Struct(">i")


class _FdFile:
    """The minimum of a file object that loop.sendfile needs, over a shared fd."""

    mode = "rb"

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def seek(self, offset: int, whence: int = 0) -> int:
        # loop.sendfile repositions the file when done; our fds are only read by
        # position (pread/sendfile with offsets), so the position is irrelevant.
        return offset


#: Event loop classes whose loop.sendfile is missing (uvloop): they use _sendfile_on_socket.
_NO_NATIVE_SENDFILE: set[type] = set()


async def _sendfile(loop: asyncio.AbstractEventLoop, transport: asyncio.Transport,
                    region: FileRegion) -> int:
    """Sends a file region after what the transport already holds; returns bytes sent."""
    if type(loop) not in _NO_NATIVE_SENDFILE:
        try:
            return await loop.sendfile(transport, _FdFile(region.fd), region.offset, region.length)
        except NotImplementedError:  # uvloop: AbstractEventLoop's stub
            _NO_NATIVE_SENDFILE.add(type(loop))
            log.info("%s has no sendfile; using os.sendfile on the socket", type(loop).__name__)
    return await _sendfile_on_socket(loop, transport, region.fd, region.offset, region.length)


async def _sendfile_on_socket(loop: asyncio.AbstractEventLoop, transport: asyncio.Transport,
                              fd: int, offset: int, count: int) -> int:
    """os.sendfile straight to the transport's socket, once its own write buffer is empty.

    For loops without loop.sendfile (uvloop). Bytes queued in the transport (the
    response header) must leave first, so sendfile only runs when that buffer is empty;
    when the socket is full, a dup of its descriptor waits for writability (the loop
    refuses a writer on a descriptor its transport owns).
    """
    sock_fd = transport.get_extra_info("socket").fileno()
    sent = 0
    waiter_fd = -1
    try:
        while sent < count:
            if transport.is_closing():
                raise ConnectionResetError("connection closed during sendfile")
            if transport.get_write_buffer_size() == 0:
                try:
                    n = os.sendfile(sock_fd, fd, offset + sent, count - sent)
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
        self.limiter: ConnectionLimiter | None = None  # set by the server (logserver.limits)

    @property
    def in_flight(self) -> int:
        return sum(connection.in_flight for connection in self.connections)

    def close_all(self) -> None:
        for connection in list(self.connections):
            connection.close()


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, dispatcher: Dispatcher, stats: ConnectionStats) -> None:
        self._dispatcher = dispatcher
        self._stats = stats
        self._max_request = dispatcher.config["socket.request.max.bytes"]
        self._max_queued = dispatcher.config["queued.max.requests"]
        self._staging = bytearray(STAGING_BYTES)
        self._staging_view = memoryview(self._staging)
        self._start = 0
        self._end = 0
        self._big: bytearray | None = None
        self._big_filled = 0
        self._pending: deque[list[Any]] = deque()  # [header, response | future]
        self._out: deque[bytes | FileRegion] = deque()
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
        self._transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        limiter = self._stats.limiter
        if limiter is not None:
            ip = peer[0] if peer else "?"
            if not limiter.admit(ip):  # logged by the limiter; Kafka also just closes
                self._closed = True
                transport.abort()
                return
            self._admitted_ip = ip
        self._stats.open_connections += 1
        self._stats.connections.add(self)
        log.debug("connection from %s", self.peer)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._admitted_ip is None and self._stats.limiter is not None:
            return  # refused on accept: never counted in
        if self._admitted_ip is not None and self._stats.limiter is not None:
            self._stats.limiter.release(self._admitted_ip)
        self._stats.open_connections -= 1
        self._stats.connections.discard(self)
        for entry in self._pending:
            if isinstance(entry[1], asyncio.Future):
                entry[1].cancel()
        self._pending.clear()
        self._out.clear()
        if self._writer is not None:
            self._writer.cancel()
        log.debug("connection from %s closed", self.peer)

    @property
    def in_flight(self) -> int:
        return len(self._pending) + len(self._out)

    def close(self) -> None:
        if self._transport is not None and not self._closed:
            self._closed = True
            self._transport.close()

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            return memoryview(self._big)[self._big_filled:]
        return self._staging_view[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active = time.monotonic()
        if self._big is not None:
            self._big_filled += nbytes
            if self._big_filled == len(self._big):
                frame, self._big = self._big, None
                self._handle_frame(frame)
            return
        self._end += nbytes
        self._parse_staged()

    def eof_received(self) -> bool:
        return False

    # -- framing ----------------------------------------------------------------------

    def _parse_staged(self) -> None:
        staging = self._staging
        while not self._closed and self._end - self._start >= 4:
            (size,) = _SIZE.unpack_from(staging, self._start)
            if size < 8 or size > self._max_request:
                self._protocol_error(
                    f"frame size {size} outside 8..{self._max_request} "
                    "(socket.request.max.bytes)")
                return
            available = self._end - self._start - 4
            if available >= size:
                body_start = self._start + 4
                frame = staging[body_start:body_start + size]
                self._start = body_start + size
                self._handle_frame(frame)
                continue
            if size + 4 > len(staging):
                self._big = bytearray(size)
                self._big[:available] = staging[self._start + 4:self._end]
                self._big_filled = available
                self._start = self._end = 0
                return
            break
        if self._start == self._end:
            self._start = self._end = 0
        elif self._start > 0:
            remaining = self._end - self._start
            staging[:remaining] = staging[self._start:self._end]
            self._start, self._end = 0, remaining

    def _protocol_error(self, reason: str) -> None:
        self._stats.protocol_errors += 1
        log.warning("closing connection from %s: %s", self.peer, reason)
        self._closed = True
        if self._transport is not None:
            self._transport.abort()

    # -- requests and responses -------------------------------------------------------

    def _handle_frame(self, frame: bytearray) -> None:
        self._stats.requests += 1
        try:
            outcome = self._dispatcher.dispatch(frame, self.peer)
        except Exception as exc:  # a bug in a handler must not kill the other clients
            log.exception("request from %s failed", self.peer)
            self._protocol_error(f"internal error: {exc!r}")
            return
        if outcome is None:
            return  # acks=0 produce: no response at all
        header, result = outcome
        if header is None:
            self._protocol_error(str(result))
            return
        if isinstance(result, Awaitable):
            future = asyncio.ensure_future(result)
            self._pending.append([header, future])
            future.add_done_callback(self._on_response_ready)
            self._update_reading()
        elif self._pending:
            self._pending.append([header, result])
        else:
            self._send(header, result)

    def _on_response_ready(self, _future: asyncio.Future[Any]) -> None:
        while self._pending and not self._closed:
            header, result = self._pending[0]
            if isinstance(result, asyncio.Future):
                if not result.done():
                    break
                if result.cancelled():
                    return
                error = result.exception()
                if error is not None:
                    log.error("request %s from %s failed", header, self.peer, exc_info=error)
                    self._protocol_error(f"internal error: {error!r}")
                    return
                result = result.result()
            self._pending.popleft()
            if result is not None:
                self._send(header, result)
        self._update_reading()

    def _send(self, header: RequestHeader, body: Any) -> None:
        chunks = encode_response(header.api_key, header.api_version, header.correlation_id, body)
        if self._writer is not None:
            self._out.extend(chunks)
            self._update_reading()
            return
        transport = self._transport
        assert transport is not None
        for index, chunk in enumerate(chunks):
            if isinstance(chunk, FileRegion):
                if chunk.length >= SENDFILE_MIN_BYTES:
                    self._out.extend(chunks[index:])
                    self._writer = asyncio.ensure_future(self._write_out())
                    return
                chunk = self._pread(chunk)
                if chunk is None:
                    return
            transport.write(chunk)

    def _pread(self, region: FileRegion) -> bytes | None:
        data = os.pread(region.fd, region.length, region.offset)
        if len(data) != region.length:
            self._protocol_error(f"segment shrank under a fetch ({len(data)} of {region.length} bytes)")
            return None
        return data

    async def _write_out(self) -> None:
        transport = self._transport
        assert transport is not None
        loop = asyncio.get_running_loop()
        try:
            while self._out and not self._closed:
                chunk = self._out.popleft()
                self._update_reading()
                if isinstance(chunk, FileRegion):
                    if chunk.length >= SENDFILE_MIN_BYTES:
                        sent = await _sendfile(loop, transport, chunk)
                        self._stats.sendfile_calls += 1
                        self._stats.sendfile_bytes += sent
                        if sent != chunk.length:
                            self._protocol_error("segment shrank under a fetch")
                            return
                        continue
                    data = self._pread(chunk)
                    if data is None:
                        return
                    chunk = data
                transport.write(chunk)
                self.last_active = time.monotonic()
        except (ConnectionError, OSError) as exc:
            log.debug("write to %s failed: %s", self.peer, exc)
            if not self._closed and self._transport is not None:
                self._transport.abort()
        finally:
            self._writer = None

    def _update_reading(self) -> None:
        if self._transport is None or self._closed:
            return
        # Responses streamed by sendfile leave the transport's buffer empty, so the chunks
        # queued behind the writer count too: a client that reads nothing stalls itself.
        should_pause = (self._writing_paused or len(self._pending) >= self._max_queued
                        or len(self._out) >= self._max_queued)
        if should_pause and not self._reading_paused:
            self._reading_paused = True
            self._transport.pause_reading()
        elif not should_pause and self._reading_paused:
            self._reading_paused = False
            self._transport.resume_reading()


def connection_factory(dispatcher: Dispatcher, stats: ConnectionStats) -> Callable[[], KafkaConnection]:
    return lambda: KafkaConnection(dispatcher, stats)
