"""The project's blocking Kafka connection: one socket to one broker, no event loop.

For programs that send a few requests and wait for each answer: the admin command line,
tests, and the benchmarks' raw client (which pipelines requests, re-sends one encoded
frame under new correlation ids, and reads large responses into one reused buffer).
The protocol work is the sans-I/O core ``kafkaproto.client``; this only moves bytes.

Failures to connect, send or receive (the broker closed the connection, or gave no
answer within the timeout) are :class:`KafkaConnectionError`, also a ``ConnectionError``;
a response stream that makes no sense raises the core's ``ProtocolError``.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from kafkaproto import ApiKey
from kafkaproto.client import ApiVersionTable, ClientConnection, KafkaConnectionError, Response
from kafkaproto.messages import ApiVersionsRequest

__all__ = ["BlockingConnection"]

_SIZE = struct.Struct(">i")


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


class BlockingConnection:
    """One connection; ``send`` and ``receive`` apart so that requests can be pipelined.

    Responses come back matched to their requests in order by the core: a response to
    a request that expected none (acks=0), or one out of order, raises.
    """

    def __init__(self, host: str, port: int, *, client_id: str | None,
                 timeout: float | None = 30.0, buffer_bytes: int = 1 << 16,
                 max_response_bytes: int = 0x7FFFFFFF) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.core = ClientConnection(client_id, max_response_bytes=max_response_bytes)
        self._buf = bytearray(buffer_bytes)  # receive_frame's reused buffer
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise KafkaConnectionError(f"cannot connect to {self.address}: {_reason(exc)}") from exc
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> BlockingConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- versions ------------------------------------------------------------------
    def negotiate(self) -> ApiVersionTable:
        """ApiVersions v0 (every broker answers it); the versions both sides speak."""
        table = ApiVersionTable.from_response(
            self.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest()))
        self.core.versions = table
        return table

    def supports(self, api_key: int) -> bool:
        return self.core.supports(api_key)

    def version(self, api_key: int, ceiling: int | None = None) -> int:
        """The highest version both sides speak (at most ``ceiling``); KafkaError if none.
        Negotiates first if this connection has not yet."""
        if self.core.versions is None:
            self.negotiate()
        return self.core.version(api_key, ceiling)

    # ---- requests ------------------------------------------------------------------
    def send(self, api_key: int, version: int, body: Any, *, expect_response: bool = True) -> int:
        """Sends a request; returns its correlation id (no answer for acks=0: say so)."""
        correlation_id, frame = self.core.request(api_key, version, body,
                                                  expect_response=expect_response)
        self._sendall(frame)
        return correlation_id

    def resend(self, api_key: int, version: int, frame: bytes) -> int:
        """Sends a frame encoded earlier again under a new correlation id, without copying it."""
        correlation_id, head = self.core.stamp(api_key, version, frame)
        body = memoryview(frame)[len(head):]
        try:
            sent = self.sock.sendmsg([head, body])
            if sent < len(head):
                self.sock.sendall(head[sent:])
                self.sock.sendall(body)
            elif sent < len(frame):
                self.sock.sendall(body[sent - len(head):])
        except OSError as exc:
            raise self._failed(exc) from exc
        return correlation_id

    def request(self, api_key: int, version: int, body: Any, *,
                timeout: float | None = None) -> Any:
        """A round trip: the decoded answer to this request. Answers still due to
        earlier requests (given up on, e.g. by Ctrl-C) are read and dropped."""
        correlation_id = self.send(api_key, version, body)
        if timeout is not None:
            self.sock.settimeout(timeout)
        try:
            while True:
                response = self.receive()
                if response.correlation_id == correlation_id:
                    break
        finally:
            if timeout is not None:
                self.sock.settimeout(self.timeout)
        if response.error is not None:
            raise response.error
        return response.body

    def ask(self, api_key: int, body: Any, *, ceiling: int | None = None,
            timeout: float | None = None) -> Any:
        """:meth:`request` at the highest version both sides speak (at most ``ceiling``)."""
        return self.request(api_key, self.version(api_key, ceiling), body, timeout=timeout)

    # ---- responses -----------------------------------------------------------------
    def receive(self) -> Response:
        """The next response (to the oldest request still waiting), in a buffer of its own."""
        head = bytearray(4)
        self._recv_exact(memoryview(head))
        frame = bytearray(self._frame_size(head))
        self._recv_exact(memoryview(frame))
        return self.core.receive_frame(frame)

    def recv(self) -> Any:
        """The body of the next response; its ``ProtocolError`` if it cannot be decoded."""
        response = self.receive()
        if response.error is not None:
            raise response.error
        return response.body

    def receive_frame(self) -> memoryview:
        """One whole response frame (size prefix stripped), valid until the next call.

        For callers that match it themselves (``core.receive_frame``, ``core.claim``):
        the buffer grows to the largest frame seen and is then reused, so a catch-up
        read allocates nothing per response.
        """
        head = bytearray(4)
        self._recv_exact(memoryview(head))
        size = self._frame_size(head)
        if size > len(self._buf):
            self._buf = bytearray(size)
        view = memoryview(self._buf)[:size]
        self._recv_exact(view)
        return view

    def _frame_size(self, head: bytearray) -> int:
        (size,) = _SIZE.unpack(head)
        if size < 4 or size > self.core.max_response_bytes:
            raise KafkaConnectionError(f"{self.address}: response frame of {size} bytes")
        return size

    def _recv_exact(self, view: memoryview) -> None:
        got, want = 0, len(view)
        recv_into = self.sock.recv_into
        try:
            while got < want:
                n = recv_into(view[got:])
                if n == 0:
                    raise KafkaConnectionError(f"{self.address} closed the connection")
                got += n
        except TimeoutError as exc:
            raise KafkaConnectionError(
                f"no answer from {self.address} within {self.sock.gettimeout() or 0:.0f} s") from exc
        except KafkaConnectionError:
            raise
        except OSError as exc:
            raise self._failed(exc) from exc

    def _sendall(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError as exc:
            raise self._failed(exc) from exc

    def _failed(self, exc: OSError) -> KafkaConnectionError:
        return KafkaConnectionError(f"connection to {self.address} failed: {_reason(exc)}")
