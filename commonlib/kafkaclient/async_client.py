"""The project's asyncio Kafka client: a cluster's metadata and connections to its brokers.

Built on :class:`AsyncConnection` (one pipelined connection per broker and purpose, so
a long-poll fetch never delays a produce acknowledgement). It speaks the handful of
APIs its users need itself (Metadata, ListOffsets, FindCoordinator; Produce, Fetch and
the group APIs are sent by its users over its connections), at the highest version both
sides speak.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from kafkaproto import ApiKey
from kafkaproto.client import KafkaConnectionError, KafkaError
from kafkaproto.messages import FindCoordinatorRequest, ListOffsetsRequest, MetadataRequest

from .address import parse_bootstrap
from .async_connection import AsyncConnection

__all__ = ["KafkaClient", "TopicMeta", "TopicPartition"]

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass
class TopicMeta:
    partitions: dict[int, int] = field(default_factory=dict)  # partition -> leader node id
    error: int = 0


class KafkaClient:
    """Metadata cache and connections by (node id, purpose) for a cluster."""

    def __init__(self, bootstrap: str, *, client_id: str | None,
                 request_timeout: float = 30.0) -> None:
        self.bootstrap = parse_bootstrap(bootstrap, default_host="127.0.0.1")
        if not self.bootstrap:
            raise ValueError("no bootstrap servers")
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.brokers: dict[int, tuple[str, int]] = {}
        self.topics: dict[str, TopicMeta] = {}
        self._conns: dict[tuple[int, str], AsyncConnection] = {}
        self._connecting: dict[tuple[int, str], asyncio.Future[AsyncConnection]] = {}
        self._meta_lock = asyncio.Lock()
        self.closed = False

    # ---- connections ---------------------------------------------------------
    async def connection(self, node: int, purpose: str = "misc") -> AsyncConnection:
        """A live connection to ``node`` (-1 = any bootstrap server) for ``purpose``."""
        key = (node, purpose)
        conn = self._conns.get(key)
        if conn is not None and not conn.closed:
            return conn
        pending = self._connecting.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[AsyncConnection] = asyncio.get_running_loop().create_future()
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

    def ready_connection(self, node: int, purpose: str = "misc") -> AsyncConnection | None:
        """The live connection to ``node`` for ``purpose`` if there is one (no waiting)."""
        conn = self._conns.get((node, purpose))
        return conn if conn is not None and not conn.closed else None

    async def _open(self, node: int) -> AsyncConnection:
        if node >= 0 and node in self.brokers:
            candidates = [self.brokers[node]]
        else:
            candidates = list(self.bootstrap) + list(self.brokers.values())
        last: Exception | None = None
        for host, port in candidates:
            conn = AsyncConnection(host, port, client_id=self.client_id,
                                   request_timeout=self.request_timeout)
            try:
                await conn.connect()
                log.debug("connected to %s:%d (node %d)", host, port, node)
                return conn
            except KafkaError as exc:
                conn.close()
                last = exc
        raise KafkaConnectionError(f"no broker reachable for node {node}: {last}")

    def drop(self, conn: AsyncConnection) -> None:
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
