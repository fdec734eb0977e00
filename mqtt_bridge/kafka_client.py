"""A small asyncio Kafka client on the ``kafkaproto`` codec: connections, metadata, offsets.

The bridge needs a handful of APIs (ApiVersions, Metadata, Produce, Fetch, ListOffsets,
InitProducerId, FindCoordinator, OffsetCommit, OffsetFetch) and wants one coherent,
fast stack, so it speaks the protocol itself instead of wrapping a general client.
Requests on one connection are pipelined and answered in order (Kafka guarantees it);
separate connections per purpose keep a long-poll fetch from delaying produce acks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkaproto import ApiKey, ProtocolError
from kafkaproto.client import (
    ApiVersionTable,
    ClientConnection,
    KafkaConnectionError,
    KafkaError,
)
from kafkaproto.messages import (
    ApiVersionsRequest,
    FindCoordinatorRequest,
    ListOffsetsRequest,
    MetadataRequest,
)

log = logging.getLogger(__name__)

CLIENT_ID = "mqtt-bridge"

TopicPartition = tuple[str, int]


class _Callback:
    """Stands in for a request's future when its caller takes the answer in a callback,
    called from ``data_received`` itself: a future's callbacks run one loop turn later,
    and under load a turn is long (the bridge's producer, see ``send_with_callback``)."""

    __slots__ = ("fn", "_done")

    def __init__(self, fn: Callable[[Any, Exception | None], None]) -> None:
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


class BrokerConnection(asyncio.Protocol):
    """One TCP connection to one broker: asyncio glue around ``kafkaproto.client``.

    Requests are written at once (pipelined); the sans-I/O core matches each response
    to its request and this resolves the request's future.
    """

    def __init__(self, host: str, port: int, *, request_timeout: float = 30.0) -> None:
        self.host = host
        self.port = port
        self.request_timeout = request_timeout
        self._core = ClientConnection(CLIENT_ID)
        self._futures: dict[int, asyncio.Future[Any] | _Callback] = {}
        self._transport: asyncio.Transport | None = None
        self.closed = False

    async def connect(self, timeout: float = 5.0) -> None:
        loop = asyncio.get_running_loop()
        try:
            await asyncio.wait_for(loop.create_connection(lambda: self, self.host, self.port),
                                   timeout)
        except (OSError, TimeoutError) as exc:
            self.closed = True
            raise KafkaConnectionError(f"connect {self.host}:{self.port}: {exc}") from exc
        response = await self.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
        self._core.versions = ApiVersionTable.from_response(response)

    @property
    def versions(self) -> dict[int, tuple[int, int]]:
        table = self._core.versions
        return {} if table is None else table.ranges

    def version(self, api_key: int, ceiling: int | None = None) -> int:
        """The highest version both sides speak; KafkaError if there is none."""
        if self._core.versions is None:
            raise KafkaConnectionError(f"{self.host}:{self.port}: not connected")
        return self._core.version(api_key, ceiling)

    def supports(self, api_key: int) -> bool:
        return self._core.supports(api_key)

    async def request(
        self, api_key: int, version: int, body: Any, *, timeout: float | None = None
    ) -> Any:
        """Send one request and wait for its response body."""
        fut = self.send(api_key, version, body)
        try:
            return await asyncio.wait_for(fut, timeout or self.request_timeout)
        except TimeoutError:
            self.close(f"request {api_key} v{version} timed out")
            raise KafkaConnectionError(f"request to {self.host}:{self.port} timed out") from None

    def send(self, api_key: int, version: int, body: Any) -> asyncio.Future[Any]:
        """Write a request now; the returned future gets its response."""
        if self.closed or self._transport is None:
            raise KafkaConnectionError(f"connection to {self.host}:{self.port} is closed")
        correlation_id, frame = self._core.request(api_key, version, body)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._futures[correlation_id] = fut
        self._transport.write(frame)
        return fut

    def send_with_callback(self, api_key: int, version: int, body: Any,
                           fn: Callable[[Any, Exception | None], None]) -> None:
        """Write a request now; ``fn(response_body, None)`` or ``fn(None, error)`` is called
        as soon as the answer is read (or the connection fails), within that callback."""
        if self.closed or self._transport is None:
            raise KafkaConnectionError(f"connection to {self.host}:{self.port} is closed")
        correlation_id, frame = self._core.request(api_key, version, body)
        self._futures[correlation_id] = _Callback(fn)
        self._transport.write(frame)

    # ---- asyncio protocol callbacks ----------------------------------------------
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

    def close(self, reason: str = "closed") -> None:
        if self.closed and not self._futures:
            return
        self.closed = True
        self._core.close()
        futures, self._futures = self._futures, {}
        for fut in futures.values():
            if not fut.done():
                fut.set_exception(KafkaConnectionError(f"{self.host}:{self.port}: {reason}"))
        if self._transport is not None:
            self._transport.close()


@dataclass
class TopicMeta:
    partitions: dict[int, int] = field(default_factory=dict)  # partition -> leader node id
    error: int = 0


class KafkaClient:
    """Metadata cache and connections by (node id, purpose) for a cluster."""

    def __init__(self, bootstrap: str, *, request_timeout: float = 30.0) -> None:
        self.bootstrap = [_parse_hostport(b) for b in bootstrap.split(",") if b.strip()]
        if not self.bootstrap:
            raise ValueError("no bootstrap servers")
        self.request_timeout = request_timeout
        self.brokers: dict[int, tuple[str, int]] = {}
        self.topics: dict[str, TopicMeta] = {}
        self._conns: dict[tuple[int, str], BrokerConnection] = {}
        self._connecting: dict[tuple[int, str], asyncio.Future[BrokerConnection]] = {}
        self._meta_lock = asyncio.Lock()
        self.closed = False

    # ---- connections ---------------------------------------------------------
    async def connection(self, node: int, purpose: str = "misc") -> BrokerConnection:
        """A live connection to ``node`` (-1 = any bootstrap server) for ``purpose``."""
        key = (node, purpose)
        conn = self._conns.get(key)
        if conn is not None and not conn.closed:
            return conn
        pending = self._connecting.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[BrokerConnection] = asyncio.get_running_loop().create_future()
        self._connecting[key] = fut
        try:
            conn = await self._open(node)
            self._conns[key] = conn
            fut.set_result(conn)
            return conn
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved: nobody else may be waiting
            raise
        finally:
            del self._connecting[key]

    def ready_connection(self, node: int, purpose: str = "misc") -> BrokerConnection | None:
        """The live connection to ``node`` for ``purpose`` if there is one (no waiting)."""
        conn = self._conns.get((node, purpose))
        return conn if conn is not None and not conn.closed else None

    async def _open(self, node: int) -> BrokerConnection:
        if node >= 0 and node in self.brokers:
            candidates = [self.brokers[node]]
        else:
            candidates = list(self.bootstrap) + list(self.brokers.values())
        last: Exception | None = None
        for host, port in candidates:
            conn = BrokerConnection(host, port, request_timeout=self.request_timeout)
            try:
                await conn.connect()
                log.debug("connected to %s:%d (node %d)", host, port, node)
                return conn
            except KafkaError as exc:
                conn.close()
                last = exc
        raise KafkaConnectionError(f"no broker reachable for node {node}: {last}")

    def drop(self, conn: BrokerConnection) -> None:
        """Forget a connection that failed (the next call reconnects)."""
        conn.close("dropped after an error")

    async def close(self) -> None:
        self.closed = True
        for conn in list(self._conns.values()):
            conn.close("client closing")
        self._conns.clear()

    # ---- metadata ------------------------------------------------------------
    async def refresh_metadata(
        self, topics: list[str] | None = None, *, auto_create: bool = True
    ) -> dict[str, TopicMeta]:
        """Metadata for ``topics`` (created if missing and ``auto_create``)."""
        async with self._meta_lock:
            conn = await self.connection(-1)
            version = conn.version(ApiKey.METADATA, 9 if auto_create else 8)
            if version < 4:
                version = min(conn.version(ApiKey.METADATA), 8)
            req = MetadataRequest(
                topics=None
                if topics is None
                else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                allow_auto_topic_creation=auto_create,
            )
            try:
                resp = await conn.request(ApiKey.METADATA, version, req)
            except KafkaError:
                self.drop(conn)
                raise
            self.brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
            out: dict[str, TopicMeta] = {}
            for t in resp.topics:
                meta = TopicMeta(
                    {p.partition_index: p.leader_id for p in t.partitions}, t.error_code
                )
                if t.error_code == 0 and meta.partitions:
                    self.topics[t.name] = meta
                out[t.name] = meta
            return out

    async def partitions(self, topic: str, *, auto_create: bool = True) -> TopicMeta:
        """The topic's partitions and leaders, from the cache or a Metadata request."""
        meta = self.topics.get(topic)
        if meta is not None:
            return meta
        got = (await self.refresh_metadata([topic], auto_create=auto_create)).get(topic)
        if got is None or got.error or not got.partitions:
            code = got.error if got is not None else 3
            raise KafkaError(f"topic {topic!r} unavailable (error {code})", code or 5)
        return got

    def leader(self, tp: TopicPartition) -> int:
        meta = self.topics.get(tp[0])
        if meta is None or tp[1] not in meta.partitions:
            return -1
        return meta.partitions[tp[1]]

    # ---- offsets ---------------------------------------------------------------
    async def list_offsets(self, tps: list[TopicPartition], timestamp: int) -> dict[TopicPartition, int]:
        """ListOffsets (-1 latest, -2 earliest) for partitions, grouped by leader."""
        by_node: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            by_node.setdefault(self.leader(tp), []).append(tp)
        out: dict[TopicPartition, int] = {}
        for node, group in by_node.items():
            conn = await self.connection(node)
            version = conn.version(ApiKey.LIST_OFFSETS, 5)
            topics: dict[str, list[int]] = {}
            for t, p in group:
                topics.setdefault(t, []).append(p)
            req = ListOffsetsRequest(
                replica_id=-1,
                isolation_level=0,
                topics=[
                    ListOffsetsRequest.ListOffsetsTopic(
                        name=t,
                        partitions=[
                            ListOffsetsRequest.ListOffsetsPartition(
                                partition_index=p, current_leader_epoch=-1, timestamp=timestamp
                            )
                            for p in ps
                        ],
                    )
                    for t, ps in topics.items()
                ],
            )
            try:
                resp = await conn.request(ApiKey.LIST_OFFSETS, version, req)
            except KafkaConnectionError:
                self.drop(conn)
                raise
            for t in resp.topics:
                for p in t.partitions:
                    if p.error_code:
                        raise KafkaError(
                            f"ListOffsets {t.name}-{p.partition_index}: error {p.error_code}",
                            p.error_code,
                        )
                    out[(t.name, p.partition_index)] = p.offset
        return out

    async def coordinator(self, group: str) -> int:
        """The node id coordinating ``group`` (FindCoordinator)."""
        conn = await self.connection(-1)
        version = conn.version(ApiKey.FIND_COORDINATOR, 3)
        resp = await conn.request(
            ApiKey.FIND_COORDINATOR, version, FindCoordinatorRequest(key=group, key_type=0)
        )
        if resp.error_code:
            raise KafkaError(f"FindCoordinator {group}: error {resp.error_code}", resp.error_code)
        self.brokers.setdefault(resp.node_id, (resp.host, resp.port))
        return resp.node_id

    async def supports(self, api_key: int) -> bool:
        conn = await self.connection(-1)
        return conn.supports(api_key)


def _parse_hostport(s: str) -> tuple[str, int]:
    s = s.strip()
    if "://" in s:
        s = s.split("://", 1)[1]
    host, _, port = s.rpartition(":")
    return (host or "127.0.0.1"), int(port or 9092)


__all__ = [
    "BrokerConnection",
    "KafkaClient",
    "KafkaConnectionError",
    "KafkaError",
    "TopicMeta",
    "TopicPartition",
]
