"""Downlink fetch loop: tail the downlink topics with long-poll Fetch requests.

The bridge runs one fetcher for all devices: every record is decoded once and handed
to ``on_records``, which fans it out. Persistent sessions that were away read their
gap with ``fetch_range`` on a separate connection, so a catch-up never waits behind the
live long poll.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable

from commonlib.kafkaclient import KafkaClient, KafkaConnectionError, KafkaError, TopicPartition
from kafkaproto import ApiKey
from kafkaproto.batch import CONTROL_MASK, CorruptBatchError, iter_batches
from kafkaproto.client import Backoff, Failures
from kafkaproto.messages import FetchRequest
from kafkaproto.records import Record, decode_batch

log = logging.getLogger(__name__)

LATEST = -1
EARLIEST = -2
#: retry.backoff.ms 100, retry.backoff.max.ms 2000: the downlink retries for ever.
_BACKOFF = Backoff(100, 2000)
# A batch inflating past this is refused (decompression bombs); far above any batch a
# device notice or command needs.
MAX_BATCH_UNCOMPRESSED = 16 << 20


class Fetcher:
    """Follow ``topics`` from their end (at start) and report records per partition."""

    def __init__(
        self,
        client: KafkaClient,
        topics: list[str],
        on_records: Callable[[TopicPartition, list[Record]], None],
        *,
        max_wait_ms: int = 500,
        partition_max_bytes: int = 4 << 20,
        metadata_interval_s: float = 30.0,
    ) -> None:
        self.client = client
        self.topics = topics
        self.on_records = on_records
        self.max_wait_ms = max_wait_ms
        self.partition_max_bytes = partition_max_bytes
        self.metadata_interval = metadata_interval_s
        self.positions: dict[TopicPartition, int] = {}
        self.ready = asyncio.Event()
        self.records_fetched = 0
        self.bad_batches = 0  # unreadable batches skipped (logged each time)
        self._task: asyncio.Task[None] | None = None

    def _on_bad_batch(self, _offset: int, _error: Exception) -> None:
        self.bad_batches += 1

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        return [tp for tp in self.positions if tp[0] == topic]

    async def _discover(self, start_at: int) -> None:
        """Learn the topics' partitions; new ones start at ``start_at`` (latest/earliest)."""
        metas = await self.client.refresh_metadata(self.topics, auto_create=True)
        new: list[TopicPartition] = []
        for topic in self.topics:
            meta = metas.get(topic)
            if meta is None or meta.error or not meta.partitions:
                code = meta.error if meta is not None else 3
                raise KafkaError(f"downlink topic {topic!r} unavailable (error {code})", code or 5)
            new += [(topic, p) for p in meta.partitions if (topic, p) not in self.positions]
        if new:
            offsets = await self.client.list_offsets(new, start_at)
            self.positions.update(offsets)
            log.info("following %d new partitions: %s", len(new), sorted(offsets.items()))

    async def _run(self) -> None:
        failures = Failures(_BACKOFF)
        last_meta = 0.0
        while True:
            try:
                now = time.monotonic()
                if not self.ready.is_set() or now - last_meta > self.metadata_interval:
                    await self._discover(LATEST if not self.ready.is_set() else EARLIEST)
                    last_meta = now
                    self.ready.set()
                await self._fetch_once()
                failures.succeeded()
            except KafkaError as exc:
                # The downlink never gives up: every error is retried, with backoff.
                delay = failures.failed()
                log.warning("downlink fetch failed: %s; retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                if not isinstance(exc, KafkaConnectionError):
                    last_meta = 0.0

    async def _fetch_once(self) -> None:
        by_node: dict[int, list[TopicPartition]] = {}
        for tp in self.positions:
            by_node.setdefault(self.client.leader(tp), []).append(tp)
        results = await asyncio.gather(
            *(self._fetch_node(node, tps) for node, tps in by_node.items()),
            return_exceptions=True,
        )
        for r in results:
            if isinstance(r, BaseException):
                raise r

    async def _fetch_node(self, node: int, tps: list[TopicPartition]) -> None:
        conn = await self.client.connection(node, "fetch")
        req = _fetch_request(
            {tp: self.positions[tp] for tp in tps}, self.max_wait_ms, self.partition_max_bytes
        )
        try:
            resp = await conn.request(
                ApiKey.FETCH,
                conn.version(ApiKey.FETCH, 11),
                req,
                timeout=self.max_wait_ms / 1000 + 30,
            )
        except KafkaConnectionError:
            self.client.drop(conn)
            raise
        refresh = False
        for t in resp.responses:
            for p in t.partitions:
                tp = (t.topic, p.partition_index)
                if p.error_code == 1:  # offset out of range: jump to the end, as a live tail
                    self.positions.update(await self.client.list_offsets([tp], LATEST))
                    continue
                if p.error_code:
                    refresh = True
                    continue
                pos = self.positions.get(tp)
                if pos is None or not p.records:
                    continue
                records, nxt = decode_from(p.records, pos, self._on_bad_batch)
                self.positions[tp] = nxt
                if records:
                    self.records_fetched += len(records)
                    try:
                        self.on_records(tp, records)
                    except Exception:  # noqa: BLE001 - one bad record must not stop the downlink
                        log.exception("downlink dispatch failed for %s-%d", *tp)
        if refresh:
            await self.client.refresh_metadata(self.topics)

    async def fetch_range(
        self, tp: TopicPartition, start: int, end: int
    ) -> AsyncIterator[tuple[int, list[Record]]]:
        """Records of ``tp`` with ``start <= offset < end`` in chunks, with the next offset."""
        pos = start
        while pos < end:
            conn = await self.client.connection(self.client.leader(tp), "catchup")
            req = _fetch_request({tp: pos}, 0, self.partition_max_bytes)
            try:
                resp = await conn.request(ApiKey.FETCH, conn.version(ApiKey.FETCH, 11), req)
            except KafkaConnectionError:
                self.client.drop(conn)
                raise
            p = resp.responses[0].partitions[0]
            if p.error_code == 1:
                earliest = (await self.client.list_offsets([tp], EARLIEST))[tp]
                if earliest <= pos:
                    return
                log.warning("%s-%d: offsets %d..%d are gone (retention)", *tp, pos, earliest)
                pos = earliest
                continue
            if p.error_code:
                raise KafkaError(f"catch-up fetch {tp}: error {p.error_code}", p.error_code)
            if not p.records:
                return
            records, nxt = decode_from(p.records, pos, self._on_bad_batch)
            if nxt <= pos:
                return
            pos = min(nxt, end)
            yield pos, [r for r in records if r.offset < end]


def _fetch_request(
    offsets: dict[TopicPartition, int], max_wait_ms: int, partition_max_bytes: int
) -> FetchRequest:
    topics: dict[str, list[FetchRequest.FetchPartition]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            FetchRequest.FetchPartition(
                partition=partition,
                current_leader_epoch=-1,
                fetch_offset=offset,
                last_fetched_epoch=-1,
                log_start_offset=-1,
                partition_max_bytes=partition_max_bytes,
            )
        )
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=64 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
        forgotten_topics_data=[],
        rack_id="",
    )


def decode_from(buf: bytes | memoryview, position: int,
                on_bad: Callable[[int, Exception], None] | None = None
                ) -> tuple[list[Record], int]:
    """Decode the complete batches in ``buf``; keep records at or after ``position``.

    Returns the records and the next offset to fetch (past control batches too).
    """
    out: list[Record] = []
    nxt = position
    try:
        for pos, header in iter_batches(buf):
            last = header.base_offset + header.last_offset_delta + 1
            if last <= nxt:
                continue
            if not header.attributes & CONTROL_MASK:
                try:
                    _h, records = decode_batch(buf, pos,
                                               max_uncompressed_bytes=MAX_BATCH_UNCOMPRESSED)
                except CorruptBatchError as exc:
                    # One bad batch must not stop delivery: log it, count it, move past it.
                    log.error("skipping unreadable batch at offset %d: %s", header.base_offset, exc)
                    if on_bad is not None:
                        on_bad(header.base_offset, exc)
                    nxt = last
                    continue
                out.extend(r for r in records if r.offset >= position)
            nxt = last
    except CorruptBatchError as exc:
        # A batch header that cannot be read (magic, length): its offsets are unknown and
        # nothing after it can be framed. Keep what came before; with nothing before it,
        # step one offset on, so that the next fetch moves past it instead of dying here.
        log.error("skipping unreadable batch header after offset %d: %s", nxt, exc)
        if on_bad is not None:
            on_bad(nxt, exc)
        if nxt == position:
            nxt = position + 1
    return out, nxt
