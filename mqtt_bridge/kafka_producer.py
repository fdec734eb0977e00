"""Batching, idempotent producer (acks=all) for the bridge's uplink.

Many devices' publishes are accumulated per partition and sent as one record batch per
partition in one Produce request per broker (``linger_ms`` / ``batch_bytes``), never one
request per message. Each partition has at most one batch in flight, so a retried batch
keeps its place and its sequence numbers: after a broker restart the broker either has
it (duplicate, acknowledged) or not (appended), and nothing acknowledged is lost.
``send`` returns a future that resolves with the record's offset once the log has it.

Sending is driven by callbacks, not a task: a new batch schedules one ``_pump`` per
loop turn, a Produce response is handled in its future's callback, which sends the
partitions' next batches at once. Under load every loop turn is long (each device
connection's read is handled in it), and each task wake-up between "batch ready" and
"request written" cost one turn. While a partition has a batch in flight its open batch
keeps growing (up to ``batch_bytes``) and goes out when the response comes back; the
linger applies only to a partition with nothing in flight.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import deque
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from commonlib.kafkaclient import AsyncConnection, KafkaClient, KafkaError, TopicPartition
from kafkaproto import ApiKey, ErrorCode
from kafkaproto.client import Backoff, RetryPolicy
from kafkaproto.messages import InitProducerIdRequest, ProduceRequest
from kafkaproto.murmur2 import partition_for
from kafkaproto.records import build_batch

log = logging.getLogger(__name__)

#: Kafka's producer defaults: retry.backoff.ms 100, retry.backoff.max.ms 1000.
RETRY_BACKOFF = Backoff(100, 1000)

Header = tuple[str, bytes | None]
_RECORD_OVERHEAD = 24  # rough per-record bytes besides key/value/headers
#: The idempotent producer starts over with a new producer id after these.
_RESET_PRODUCER = {
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.UNKNOWN_PRODUCER_ID,
    ErrorCode.PRODUCER_FENCED,
}


def _record_size(key: bytes | None, value: bytes | None, headers: Sequence[Header]) -> int:
    return _RECORD_OVERHEAD + (len(key) if key else 0) + (len(value) if value else 0) + headers_size(headers)


def headers_size(headers: Sequence[Header]) -> int:
    """What ``headers`` add to a record's size in the producer's buffer accounting."""
    return sum(len(hk) + (len(hv) if hv else 0) + 4 for hk, hv in headers)


@dataclass(eq=False)
class _Batch:
    tp: TopicPartition
    created: float
    records: list[tuple[bytes | None, bytes | None, Sequence[Header], int]] = field(
        default_factory=list
    )
    #: (index of the record in the batch, its future) for records from ``send``
    futures: list[tuple[int, asyncio.Future[int]]] = field(default_factory=list)
    #: one future for the whole batch (``send_shared``), made on first use
    shared: asyncio.Future[None] | None = None
    size: int = 0
    payload: bytes | None = None
    pid_gen: int = -1
    attempts: int = 0


def _retrieve(fut: asyncio.Future[Any]) -> None:
    """Mark a failed future's exception seen: whoever needs it reads it from the future."""
    if not fut.cancelled():
        fut.exception()


def _resolve_when_all(target: asyncio.Future[Any], sources: list[asyncio.Future[Any]]) -> None:
    """Resolve ``target`` once every one of ``sources`` has; fail it with the first failure."""
    pending = len(sources)

    def one_done(f: asyncio.Future[Any]) -> None:
        nonlocal pending
        if target.done():
            return
        if f.cancelled():
            target.set_exception(KafkaError("produce cancelled"))
            return
        exc = f.exception()
        if exc is not None:
            target.set_exception(exc)
            return
        pending -= 1
        if pending == 0:
            target.set_result(None)

    for f in sources:
        f.add_done_callback(one_done)


class Producer:
    """Accumulate records per partition and send them in batches; see the module docstring."""

    def __init__(
        self,
        client: KafkaClient,
        *,
        linger_ms: float = 5.0,
        batch_bytes: int = 1 << 20,
        acks: int = -1,
        idempotent: bool = True,
        request_timeout_ms: int = 30_000,
        delivery_timeout_s: float = 120.0,
        buffer_bytes: int = 64 << 20,
        retry_backoff: Backoff = RETRY_BACKOFF,
    ) -> None:
        self.client = client
        self.linger = linger_ms / 1000.0
        self.batch_bytes = batch_bytes
        self.acks = acks
        self.idempotent = idempotent
        self.request_timeout_ms = request_timeout_ms
        self.delivery_timeout = delivery_timeout_s
        self.buffer_bytes = buffer_bytes
        self.retry = RetryPolicy(retry_backoff, delivery_timeout_s)
        self.buffered = 0
        self.requests_sent = 0
        self.records_acked = 0
        self._acc: dict[TopicPartition, _Batch] = {}
        self._ready: dict[TopicPartition, deque[_Batch]] = {}
        self._inflight: set[TopicPartition] = set()
        self._retry_at: dict[TopicPartition, float] = {}
        self._unknown: dict[str, list[tuple[bytes | None, bytes | None, Sequence[Header], int, asyncio.Future[Any]]]] = {}
        self._unknown_shared: dict[str, asyncio.Future[Any]] = {}
        self._rr: dict[str, int] = {}
        self._seq: dict[TopicPartition, int] = {}
        self._pid = -1
        self._epoch = -1
        self._pid_gen = 0
        self._pid_ready = False
        self._pid_lock = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pump_scheduled = False
        self._timer: asyncio.TimerHandle | None = None
        self._space_waiters: list[Callable[[], None]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False

    # ---- public ------------------------------------------------------------------
    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._kick()

    @property
    def full(self) -> bool:
        return self.buffered >= self.buffer_bytes

    def when_space(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the buffer has drained below the limit (backpressure)."""
        self._space_waiters.append(callback)

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] = (),
        timestamp_ms: int | None = None,
    ) -> asyncio.Future[int]:
        """Queue one record; the future resolves with its offset once acknowledged."""
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        size = _record_size(key, value, headers)
        self.buffered += size
        meta = self.client.topics.get(topic)
        if meta is None:
            waiting = self._unknown.get(topic)
            if waiting is None:
                self._unknown[topic] = [(key, value, headers, ts, fut)]
                self._spawn(self._resolve_topic(topic))
            else:
                waiting.append((key, value, headers, ts, fut))
            return fut
        self._append(topic, len(meta.partitions), key, value, headers, ts, fut, size)
        return fut

    def send_shared(
        self, topic: str, key: bytes | None, value: bytes | None, headers: Sequence[Header] = (),
        headers_bytes: int = -1,
    ) -> asyncio.Future[Any]:
        """Queue one record; the future resolves (to no offset) once it is acknowledged.

        The future is shared by every record of its batch: the MQTT uplink, which needs
        only "in the log", pays one future and one callback per batch instead of one
        per message (per-record futures were a fifth of the bridge's CPU per message).
        ``headers_bytes``: ``headers_size(headers)`` when the caller keeps it with them.
        """
        size = _RECORD_OVERHEAD + (len(key) if key else 0) + (len(value) if value else 0) + (
            headers_bytes if headers_bytes >= 0 else headers_size(headers))
        self.buffered += size
        meta = self.client.topics.get(topic)
        if meta is None:  # the topic's metadata first: one future for all that wait for it
            return self._wait_for_topic(topic, key, value, headers, size)
        return self._append_shared(topic, len(meta.partitions), key, value, headers,
                                   int(time.time() * 1000), size)

    def _wait_for_topic(self, topic: str, key: bytes | None, value: bytes | None,
                        headers: Sequence[Header], size: int) -> asyncio.Future[Any]:
        """Park a ``send_shared`` record until the topic's metadata is known.

        The records that arrive meanwhile share one future (resolved once every batch
        they land in is acknowledged): a future and a callback context each were
        40,000 objects after a bridge's start under load, kept alive for seconds and
        scanned by every full garbage collection.
        """
        fut = self._unknown_shared.get(topic)
        if fut is None:
            fut = self._unknown_shared[topic] = asyncio.get_running_loop().create_future()
            fut.add_done_callback(_retrieve)
        waiting = self._unknown.get(topic)
        item = (key, value, headers, int(time.time() * 1000), fut)
        if waiting is None:
            self._unknown[topic] = [item]
            self._spawn(self._resolve_topic(topic))
        else:
            waiting.append(item)
        return fut

    def _append_shared(self, topic: str, nparts: int, key: bytes | None, value: bytes | None,
                       headers: Sequence[Header], ts: int, size: int) -> asyncio.Future[Any]:
        batch = self._batch_for(topic, nparts, key)
        batch.records.append((key, value, headers, ts))
        batch.size += size
        fut = batch.shared
        if fut is None:
            fut = batch.shared = asyncio.get_running_loop().create_future()
        if batch.size >= self.batch_bytes:
            self._close_batch(batch.tp)
            self._kick()
        return fut

    async def flush(self, timeout: float = 30.0) -> None:
        """Send everything buffered now and wait until it is acknowledged (or failed)."""
        batches = list(self._acc.values()) + [b for q in self._ready.values() for b in q]
        pending: list[asyncio.Future[Any]] = [f for b in batches for _i, f in b.futures]
        pending += [b.shared for b in batches if b.shared is not None]
        pending += [item[4] for items in self._unknown.values() for item in items]
        for tp in list(self._acc):
            self._close_batch(tp)
        self._kick()
        if pending:
            await asyncio.wait(pending, timeout=timeout)

    async def close(self, timeout: float = 10.0) -> None:
        try:
            await self.flush(timeout)
        finally:
            self._closing = True
            if self._timer is not None:
                self._timer.cancel()
            for t in list(self._tasks):
                t.cancel()
            err = KafkaError("producer closed")
            for b in list(self._acc.values()) + [b for q in self._ready.values() for b in q]:
                for _i, f in b.futures:
                    if not f.done():
                        f.set_exception(err)
                if b.shared is not None and not b.shared.done():
                    b.shared.set_exception(err)

    # ---- accumulation --------------------------------------------------------------
    def _append(
        self,
        topic: str,
        nparts: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        ts: int,
        fut: asyncio.Future[int],
        size: int,
    ) -> None:
        batch = self._batch_for(topic, nparts, key)
        batch.records.append((key, value, headers, ts))
        batch.futures.append((len(batch.records) - 1, fut))
        batch.size += size
        if batch.size >= self.batch_bytes:
            self._close_batch(batch.tp)
            self._kick()

    def _batch_for(self, topic: str, nparts: int, key: bytes | None) -> _Batch:
        """The open batch of the record's partition (Kafka's default partitioner)."""
        if key is not None:
            partition = partition_for(key, nparts)
        else:
            partition = self._rr.get(topic, 0) % nparts
            self._rr[topic] = partition + 1
        tp = (topic, partition)
        batch = self._acc.get(tp)
        if batch is None:
            batch = self._acc[tp] = _Batch(tp, time.monotonic())
            self._kick()
        return batch

    def _close_batch(self, tp: TopicPartition) -> None:
        batch = self._acc.pop(tp, None)
        if batch is not None:
            self._ready.setdefault(tp, deque()).append(batch)

    async def _resolve_topic(self, topic: str) -> None:
        started = time.monotonic()
        failures = 0
        error: Exception | None = None
        while True:
            try:
                meta = await self.client.partitions(topic, auto_create=True)
                break
            except KafkaError as exc:
                error = exc
                failures += 1
                decision = self.retry.decide(exc, failures, time.monotonic() - started)
                if not decision.retry:
                    meta = None
                    break
                log.warning("metadata for %s failed (%s), retrying", topic, exc)
                await asyncio.sleep(decision.delay_s)
        waiting = self._unknown.pop(topic, [])
        shared = self._unknown_shared.pop(topic, None)
        landed: dict[int, asyncio.Future[Any]] = {}  # the batch futures shared records got
        for key, value, headers, ts, fut in waiting:
            size = _record_size(key, value, headers)
            if meta is None:
                self.buffered -= size
                if not fut.done():
                    fut.set_exception(error or KafkaError(f"topic {topic} unavailable"))
            elif fut is shared:
                got = self._append_shared(topic, len(meta.partitions), key, value, headers, ts, size)
                landed[id(got)] = got
            else:
                self._append(topic, len(meta.partitions), key, value, headers, ts, fut, size)
        if shared is not None and landed:
            _resolve_when_all(shared, list(landed.values()))
        self._release_space()

    # ---- sending -------------------------------------------------------------------
    def _kick(self) -> None:
        """Run ``_pump`` once, later in this loop turn (after the reads already due)."""
        if not self._pump_scheduled and self._loop is not None and not self._closing:
            self._pump_scheduled = True
            self._loop.call_soon(self._pump)

    def _pump(self) -> None:
        """Close the batches that are due and send every partition's next batch."""
        self._pump_scheduled = False
        if self._closing:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        now = time.monotonic()
        next_at: float | None = None
        ready = self._ready
        inflight = self._inflight
        for tp, batch in list(self._acc.items()):
            if tp in inflight or ready.get(tp):
                continue  # busy: the batch grows until the partition is free (that pumps again)
            due = batch.created + self.linger
            if due <= now:
                self._close_batch(tp)
            elif next_at is None or due < next_at:
                next_at = due
        by_node: dict[int, list[_Batch]] = {}
        for tp, queue in ready.items():
            if not queue or tp in inflight:
                continue
            retry_at = self._retry_at.get(tp, 0.0)
            if retry_at > now:
                next_at = retry_at if next_at is None else min(next_at, retry_at)
                continue
            node = self.client.leader(tp)
            if node < 0:
                self._retry_at[tp] = now + self.retry.delay_s(1)
                self._spawn(self._refresh(tp[0]))
                continue
            inflight.add(tp)
            by_node.setdefault(node, []).append(queue.popleft())
        for node, batches in by_node.items():
            conn = self.client.ready_connection(node, "produce")
            if conn is None or (self.idempotent and not self._pid_ready):
                self._spawn(self._send(node, batches))  # connect / producer id first
            else:
                self._send_on(conn, node, batches)
        if next_at is not None and self._loop is not None:
            self._timer = self._loop.call_later(max(0.0, next_at - time.monotonic()), self._kick)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _refresh(self, topic: str) -> None:
        try:
            await self.client.refresh_metadata([topic])
        except KafkaError as exc:
            log.debug("metadata refresh for %s failed: %s", topic, exc)
        self._kick()

    async def _ensure_pid(self) -> None:
        if not self.idempotent or self._pid_ready:
            return
        async with self._pid_lock:
            if self._pid_ready:
                return
            conn = await self.client.connection(-1)
            if not conn.supports(ApiKey.INIT_PRODUCER_ID):
                log.warning("broker has no InitProducerId: producing without idempotence")
                self.idempotent = False
                return
            version = conn.version(ApiKey.INIT_PRODUCER_ID, 4)
            resp = await conn.request(
                ApiKey.INIT_PRODUCER_ID,
                version,
                InitProducerIdRequest(
                    transactional_id=None,
                    transaction_timeout_ms=2_147_483_647,
                    producer_id=-1,
                    producer_epoch=-1,
                ),
            )
            if resp.error_code:
                raise KafkaError(f"InitProducerId error {resp.error_code}", resp.error_code)
            self._pid, self._epoch = resp.producer_id, resp.producer_epoch
            self._pid_ready = True
            self._seq.clear()
            log.info("producer id %d epoch %d", self._pid, self._epoch)

    def _encode(self, batch: _Batch) -> bytes:
        if batch.payload is not None and batch.pid_gen == self._pid_gen:
            return batch.payload
        seq = -1
        if self.idempotent and self._pid >= 0:
            seq = self._seq.get(batch.tp, 0)
            self._seq[batch.tp] = (seq + len(batch.records)) & 0x7FFFFFFF
        batch.payload = build_batch(
            batch.records,
            producer_id=self._pid if self.idempotent else -1,
            producer_epoch=self._epoch if self.idempotent else -1,
            base_sequence=seq,
        )
        batch.pid_gen = self._pid_gen
        return batch.payload

    async def _send(self, node: int, batches: list[_Batch]) -> None:
        """The slow start of a send: the producer id and the connection, then ``_send_on``."""
        try:
            await self._ensure_pid()
            conn = await self.client.connection(node, "produce")
        except KafkaError as exc:
            self._send_failed(node, batches, exc)
            return
        if self._closing:
            return
        self._send_on(conn, node, batches)

    def _send_on(self, conn: AsyncConnection, node: int, batches: list[_Batch]) -> None:
        """Write one Produce request for ``batches``; ``_on_response`` takes the answer."""
        try:
            topics: dict[str, list[ProduceRequest.PartitionProduceData]] = {}
            for b in batches:
                b.attempts += 1
                topics.setdefault(b.tp[0], []).append(
                    ProduceRequest.PartitionProduceData(index=b.tp[1], records=self._encode(b))
                )
            req = ProduceRequest(
                transactional_id=None,
                acks=self.acks,
                timeout_ms=self.request_timeout_ms,
                topic_data=[
                    ProduceRequest.TopicProduceData(name=t, partition_data=pd)
                    for t, pd in topics.items()
                ],
            )
            version = conn.version(ApiKey.PRODUCE, 9)
            # no answer in time: the connection is closed, which fails the request
            timer = asyncio.get_running_loop().call_later(
                self.request_timeout_ms / 1000 + 5, conn.close, "produce request timed out")
            try:
                conn.send_with_callback(ApiKey.PRODUCE, version, req,
                                        functools.partial(self._on_response, node, batches, timer))
            except BaseException:
                timer.cancel()
                raise
        except KafkaError as exc:
            self._send_failed(node, batches, exc)
            return
        self.requests_sent += 1

    def _on_response(self, node: int, batches: list[_Batch], timer: asyncio.TimerHandle,
                     resp: Any, exc: Exception | None) -> None:
        """A Produce answer (called while its bytes are read) or the request's failure."""
        timer.cancel()
        if exc is not None:
            self._send_failed(node, batches, exc if isinstance(exc, KafkaError) else KafkaError(str(exc)))
            return
        results = {
            (t.name, p.index): p for t in resp.responses for p in t.partition_responses
        }
        for b in batches:
            self._inflight.discard(b.tp)
            p = results.get(b.tp)
            code = ErrorCode.NETWORK_EXCEPTION if p is None else p.error_code
            if code == 0 or code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                base = p.base_offset if (p is not None and code == 0) else -1
                self._complete(b, base)
            elif code in _RESET_PRODUCER:
                log.warning("produce %s-%d: error %d, resetting producer id", *b.tp, code)
                self._reset_pid()
                self._retry(b)
            elif self._retry_or_fail(
                    b, KafkaError(f"produce {b.tp[0]}-{b.tp[1]}: error {code}", code)):
                self._spawn(self._refresh(b.tp[0]))
        self._release_space()
        self._pump()  # the partitions are free: their next batches go out now

    def _send_failed(self, node: int, batches: list[_Batch], exc: KafkaError) -> None:
        log.warning("produce to node %d failed: %s", node, exc)
        for b in batches:
            self._retry_or_fail(b, exc)
        self._spawn(self._refresh(batches[0].tp[0]))
        self._release_space()
        self._kick()

    def _reset_pid(self) -> None:
        self._pid_ready = False
        self._pid_gen += 1
        self._seq.clear()

    def _retry_or_fail(self, b: _Batch, error: KafkaError) -> bool:
        """Retries ``b`` when the error is retriable (and time is left), else fails it."""
        if self.retry.decide(error, b.attempts).retry:
            self._retry(b)
            return True
        self._inflight.discard(b.tp)
        self._fail(b, error)
        return False

    def _retry(self, b: _Batch) -> None:
        self._inflight.discard(b.tp)
        if time.monotonic() - b.created > self.delivery_timeout:
            self._fail(b, KafkaError(f"delivery to {b.tp[0]}-{b.tp[1]} timed out",
                                     ErrorCode.REQUEST_TIMED_OUT))
            return
        self._ready.setdefault(b.tp, deque()).appendleft(b)
        self._retry_at[b.tp] = time.monotonic() + self.retry.delay_s(b.attempts + 1)

    def _complete(self, b: _Batch, base: int) -> None:
        self.records_acked += len(b.records)
        self.buffered -= b.size
        for i, f in b.futures:  # records from send(): offset = base + place in the batch
            if not f.done():
                f.set_result(base + i if base >= 0 else -1)
        if b.shared is not None and not b.shared.done():
            b.shared.set_result(None)

    def _fail(self, b: _Batch, exc: Exception) -> None:
        log.error("dropping %d records for %s-%d: %s", len(b.records), b.tp[0], b.tp[1], exc)
        self.buffered -= b.size
        for _i, f in b.futures:
            if not f.done():
                f.set_exception(exc)
        if b.shared is not None and not b.shared.done():
            b.shared.set_exception(exc)
            b.shared.exception()  # retrieved: each waiter reads it from its own callback

    def _release_space(self) -> None:
        if self._space_waiters and self.buffered < self.buffer_bytes * 0.8:
            waiters, self._space_waiters = self._space_waiters, []
            for cb in waiters:
                cb()
