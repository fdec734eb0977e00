"""One client connection to a broker, sans-I/O: requests out, responses matched in order.

Kafka answers the requests of one connection in the order they were sent (except a
Produce with acks=0, which gets no answer), so the next response always belongs to the
oldest request still waiting. The caller writes the bytes this returns and feeds in
the bytes it reads; nothing here touches a socket.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass

from ..codegen import Message
from ..errors import DecodeError, ProtocolError
from ..frames import decode_response, encode_request
from .versions import ApiVersionTable

__all__ = ["ClientConnection", "InFlight", "Response", "UnexpectedResponseError"]

_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
_HEAD = 12  # size, api key, api version, correlation id
Buffer = bytes | bytearray | memoryview


class UnexpectedResponseError(ProtocolError):
    """A response that answers no request, or not the oldest one: the stream is lost."""


@dataclass(slots=True)
class InFlight:
    """A request sent and not answered yet."""

    correlation_id: int
    api_key: int
    api_version: int


@dataclass(slots=True)
class Response:
    """A response matched to its request; ``error`` when its body could not be decoded."""

    correlation_id: int
    api_key: int
    api_version: int
    body: Message | None
    error: ProtocolError | None = None


class ClientConnection:
    """Correlation ids, response framing and matching, and the negotiated versions."""

    def __init__(self, client_id: str | None, *, max_response_bytes: int = 0x7FFFFFFF) -> None:
        self.client_id = client_id
        self.max_response_bytes = max_response_bytes
        self.versions: ApiVersionTable | None = None
        self._correlation = 0
        self._waiting: deque[InFlight] = deque()
        self._buffer = bytearray()

    # ---- requests ----------------------------------------------------------------
    def _next_correlation(self) -> int:
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        return self._correlation

    def request(self, api_key: int, version: int, body: Message, *,
                expect_response: bool = True) -> tuple[int, bytes]:
        """The frame to send for ``body`` and its correlation id.

        ``expect_response=False`` for a Produce with acks=0, which the broker never answers.
        """
        correlation_id = self._next_correlation()
        frame = encode_request(api_key, version, correlation_id, self.client_id, body)
        if expect_response:
            self._waiting.append(InFlight(correlation_id, api_key, version))
        return correlation_id, frame

    def stamp(self, api_key: int, version: int, frame: Buffer, *,
              expect_response: bool = True) -> tuple[int, bytes]:
        """Sends again a frame encoded earlier for the same API and version.

        Returns the correlation id and a new 12-byte head (size, key, version, the new
        correlation id) to send in place of the frame's first 12 bytes, so a large
        request is never copied to be sent again.
        """
        correlation_id = self._next_correlation()
        head = bytearray(frame[:_HEAD])
        _CORRELATION.pack_into(head, 8, correlation_id)
        if expect_response:
            self._waiting.append(InFlight(correlation_id, api_key, version))
        return correlation_id, bytes(head)

    # ---- versions ----------------------------------------------------------------
    def version(self, api_key: int, ceiling: int | None = None) -> int:
        """The version to use (see :class:`ApiVersionTable`); needs ``versions`` set."""
        if self.versions is None:
            raise RuntimeError("no ApiVersions response seen on this connection yet")
        return self.versions.version(api_key, ceiling)

    def supports(self, api_key: int) -> bool:
        return self.versions is not None and self.versions.supports(api_key)

    # ---- responses ---------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        return len(self._waiting)

    def claim(self, correlation_id: int) -> InFlight:
        """The oldest waiting request, which the response with ``correlation_id`` answers.

        For callers that parse a response themselves (streaming it from a socket).
        Raises :class:`UnexpectedResponseError` if it answers no request or another one.
        """
        if not self._waiting:
            raise UnexpectedResponseError(f"response {correlation_id} without a request")
        expected = self._waiting[0]
        if expected.correlation_id != correlation_id:
            raise UnexpectedResponseError(
                f"correlation id {correlation_id}, expected {expected.correlation_id}")
        return self._waiting.popleft()

    def receive_frame(self, frame: Buffer) -> Response:
        """Matches and decodes one whole response frame (its size prefix stripped)."""
        if len(frame) < 4:
            raise UnexpectedResponseError(f"response frame of {len(frame)} bytes")
        request = self.claim(_CORRELATION.unpack_from(frame, 0)[0])
        try:
            _, body = decode_response(request.api_key, request.api_version, frame)
        except DecodeError as exc:
            return Response(request.correlation_id, request.api_key, request.api_version, None, exc)
        return Response(request.correlation_id, request.api_key, request.api_version, body)

    def receive_data(self, data: Buffer) -> list[Response]:
        """Bytes read from the socket in; the responses they complete out, in order."""
        buffer = self._buffer
        buffer += data
        out: list[Response] = []
        start = 0
        end = len(buffer)
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(buffer, start)
            if size < 4 or size > self.max_response_bytes:
                raise UnexpectedResponseError(f"response frame size {size}")
            if end - start - 4 < size:
                break
            # A copy: decoded records are views of the frame, which must not move.
            with memoryview(buffer) as view:
                frame = bytes(view[start + 4:start + 4 + size])
            out.append(self.receive_frame(frame))
            start += 4 + size
        if start:
            del buffer[:start]
        return out

    def close(self) -> list[InFlight]:
        """The connection is gone: the requests that will never be answered."""
        lost = list(self._waiting)
        self._waiting.clear()
        self._buffer.clear()
        return lost
