"""The project's asyncio Kafka connection: one TCP connection to one broker, pipelined.

The protocol work (correlation ids, framing, matching responses to requests in order,
version negotiation) is the sans-I/O core ``kafkaproto.client``; this is its only
asyncio glue, used by the MQTT bridge's producer and fetchers and by the broker's own
requests to its peers (replica fetchers, transaction markers, admin and REST calls).

Requests are written at once (pipelined, Kafka answers a connection's requests in
order); each gets a future, or a callback run straight from ``data_received`` when the
caller cannot wait a loop turn for the answer (the bridge's produce path).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kafkaproto import ApiKey, ProtocolError
from kafkaproto.client import ApiVersionTable, ClientConnection, KafkaConnectionError
from kafkaproto.messages import ApiVersionsRequest

__all__ = ["AsyncConnection", "ResponseCallback"]

log = logging.getLogger(__name__)

ResponseCallback = Callable[[Any, Exception | None], None]


class _Callback:
    """Stands in for a request's future when its caller takes the answer in a callback,
    called from ``data_received`` itself: a future's callbacks run one loop turn later,
    and under load a turn is long (the bridge's producer, see ``send_with_callback``)."""

    __slots__ = ("fn", "_done")

    def __init__(self, fn: ResponseCallback) -> None:
        self.fn = fn
        self._done = False

    def done(self) -> bool:
        return self._done

    def set_result(self, body: Any) -> None:
        self._finish(body, None)

    def set_exception(self, exc: Exception) -> None:
        self._finish(None, exc)

    def _finish(self, body: Any, exc: Exception | None) -> None:
        self._done = True
        try:
            self.fn(body, exc)
        except Exception:  # noqa: BLE001 - one caller's bug must not stop the connection
            log.exception("response callback failed")


class AsyncConnection(asyncio.Protocol):
    """One TCP connection to one broker: asyncio glue around ``kafkaproto.client``.

    Failures are :class:`KafkaConnectionError` (retriable, and a ``ConnectionError``);
    a response whose body cannot be decoded fails its request with the ``ProtocolError``.
    """

    def __init__(self, host: str, port: int, *, client_id: str | None,
                 request_timeout: float | None = 30.0) -> None:
        self.host = host
        self.port = port
        self.request_timeout = request_timeout  # None: wait as long as it takes
        self._core = ClientConnection(client_id)
        self._futures: dict[int, asyncio.Future[Any] | _Callback] = {}
        self._transport: asyncio.Transport | None = None
        self._lost: asyncio.Future[None] | None = None
        self.closed = False

    @classmethod
    async def open(cls, host: str, port: int, *, client_id: str | None,
                   request_timeout: float | None = 30.0, connect_timeout: float | None = 5.0,
                   negotiate: bool = True) -> AsyncConnection:
        """A connected connection (with the broker's versions if ``negotiate``)."""
        conn = cls(host, port, client_id=client_id, request_timeout=request_timeout)
        try:
            await conn.connect(connect_timeout, negotiate=negotiate)
        except BaseException:
            conn.close("connect failed")
            raise
        return conn

    async def connect(self, timeout: float | None = 5.0, *, negotiate: bool = True) -> None:
        """Connects; then ApiVersions v0 (every broker answers it) if ``negotiate``."""
        loop = asyncio.get_running_loop()
        self._lost = loop.create_future()
        try:
            await asyncio.wait_for(loop.create_connection(lambda: self, self.host, self.port),
                                   timeout)
        except (OSError, TimeoutError) as exc:
            self.closed = True
            raise KafkaConnectionError(f"connect {self.address}: {exc}") from exc
        if negotiate:
            response = await self.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
            self._core.versions = ApiVersionTable.from_response(response)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def client_id(self) -> str | None:
        return self._core.client_id

    @client_id.setter
    def client_id(self, value: str | None) -> None:
        """The client id of the requests sent from now on (a broker's logs and quotas)."""
        self._core.client_id = value

    # ---- versions ------------------------------------------------------------------
    @property
    def versions(self) -> dict[int, tuple[int, int]]:
        table = self._core.versions
        return {} if table is None else table.ranges

    def version(self, api_key: int, ceiling: int | None = None) -> int:
        """The highest version both sides speak; KafkaError if there is none."""
        if self._core.versions is None:
            raise KafkaConnectionError(f"{self.address}: not connected")
        return self._core.version(api_key, ceiling)

    def supports(self, api_key: int) -> bool:
        return self._core.supports(api_key)

    # ---- requests ------------------------------------------------------------------
    async def request(self, api_key: int, version: int, body: Any, *,
                      timeout: float | None = None) -> Any:
        """Send one request and wait for its response body (``timeout`` or the
        connection's ``request_timeout``; a timed-out connection is closed)."""
        fut = self.send(api_key, version, body)
        limit = timeout if timeout is not None else self.request_timeout
        try:
            return await asyncio.wait_for(fut, limit)
        except TimeoutError:
            self.close(f"request {api_key} v{version} timed out")
            raise KafkaConnectionError(f"request to {self.address} timed out") from None

    def send(self, api_key: int, version: int, body: Any) -> asyncio.Future[Any]:
        """Write a request now; the returned future gets its response."""
        if self.closed or self._transport is None:
            raise KafkaConnectionError(f"connection to {self.address} is closed")
        correlation_id, frame = self._core.request(api_key, version, body)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._futures[correlation_id] = fut
        self._transport.write(frame)
        return fut

    def send_with_callback(self, api_key: int, version: int, body: Any,
                           fn: ResponseCallback) -> None:
        """Write a request now; ``fn(response_body, None)`` or ``fn(None, error)`` is called
        as soon as the answer is read (or the connection fails), within that callback."""
        if self.closed or self._transport is None:
            raise KafkaConnectionError(f"connection to {self.address} is closed")
        correlation_id, frame = self._core.request(api_key, version, body)
        self._futures[correlation_id] = _Callback(fn)
        self._transport.write(frame)

    # ---- asyncio protocol callbacks ------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop: a look-alike

    def data_received(self, data: bytes) -> None:
        try:
            responses = self._core.receive_data(data)
        except ProtocolError as exc:
            self.close(f"unusable response stream: {exc}")
            return
        for response in responses:
            fut = self._futures.pop(response.correlation_id, None)
            if fut is None or fut.done():
                continue
            if response.error is not None:
                fut.set_exception(response.error)
            else:
                fut.set_result(response.body)

    def connection_lost(self, exc: Exception | None) -> None:
        self.close(f"connection lost: {exc!r}" if exc else "connection closed by broker")
        if self._lost is not None and not self._lost.done():
            self._lost.set_result(None)

    def close(self, reason: str = "closed") -> None:
        """Close now; every request still waiting fails with KafkaConnectionError."""
        if self.closed and not self._futures:
            if self._transport is not None and not self._transport.is_closing():
                self._transport.close()
            return
        self.closed = True
        self._core.close()
        futures, self._futures = self._futures, {}
        for fut in futures.values():
            if not fut.done():
                fut.set_exception(KafkaConnectionError(f"{self.address}: {reason}"))
        if self._transport is not None:
            self._transport.close()

    async def wait_closed(self) -> None:
        """Until the transport is gone (after :meth:`close`)."""
        if self._lost is not None and self._transport is not None:
            await asyncio.shield(self._lost)
