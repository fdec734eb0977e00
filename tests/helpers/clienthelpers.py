"""Thin helpers around the real Kafka clients used by the integration tests.

Every reader returns records in one normal form, ``Rec``, so that what one client
wrote can be compared with what every other client reads back.  Consumers never use
consumer groups (the server has no group APIs yet): they ``assign`` and ``seek``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import time
from collections import defaultdict
from typing import NamedTuple

KP_TIMEOUTS = {
    "request_timeout_ms": 15000,
}


class Rec(NamedTuple):
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


def by_partition(records) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = defaultdict(list)
    for r in records:
        out[r.partition].append(r)
    for recs in out.values():
        recs.sort(key=lambda r: r.offset)
    return dict(out)


def _headers(h) -> tuple[tuple[str, bytes], ...]:
    if not h:
        return ()
    return tuple((k if isinstance(k, str) else k.decode(), bytes(v) if v is not None else None)
                 for k, v in h)


# ---------------------------------------------------------------- kafka-python
def kp_admin(bootstrap: str):
    from kafka import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)


def create_topic(bootstrap: str, name: str, partitions: int = 3) -> None:
    """CreateTopics through kafka-python's admin client, then wait for metadata."""
    admin = kp_admin(bootstrap)
    try:
        admin.create_topics(
            {name: {"num_partitions": partitions, "replication_factor": 1}},
            timeout_ms=10000,
            wait_for_metadata=True,
        )
    finally:
        admin.close()


def kp_producer(bootstrap: str, **config):
    from kafka import KafkaProducer

    cfg = dict(KP_TIMEOUTS)
    cfg.update(config)
    return KafkaProducer(bootstrap_servers=bootstrap, **cfg)


def kp_consumer(bootstrap: str, **config):
    """A kafka-python consumer without a group (assign/seek only)."""
    from kafka import KafkaConsumer

    cfg = dict(KP_TIMEOUTS)
    cfg.update(
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        consumer_timeout_ms=1000,
    )
    cfg.update(config)
    return KafkaConsumer(bootstrap_servers=bootstrap, **cfg)


def kp_close(producer, timeout: float = 10.0) -> None:
    """Close a kafka-python producer without raising: kafka-python 3.0's close() raises
    KafkaTimeoutError from its flush() when batches are still pending (dead broker)."""
    try:
        producer.close(timeout=timeout)
    except Exception:  # noqa: BLE001
        producer.flush = lambda timeout=None: None
        producer.close(timeout=1)


def kp_produce(bootstrap: str, topic: str, items, *, producer_config=None, timeout=60.0) -> list[Rec]:
    """Send ``items`` (dicts with value, key, headers, timestamp_ms, partition) with a
    kafka-python producer; return what the broker acknowledged, as ``Rec``s."""
    producer = kp_producer(bootstrap, **(producer_config or {}))
    try:
        sent = []
        for it in items:
            fut = producer.send(
                topic,
                value=it.get("value"),
                key=it.get("key"),
                headers=list(it.get("headers") or []),
                timestamp_ms=it.get("timestamp_ms"),
                partition=it.get("partition"),
            )
            sent.append((it, fut))
        producer.flush(timeout=timeout)
        out = []
        for it, fut in sent:
            md = fut.get(timeout=timeout)
            out.append(Rec(md.partition, md.offset, it.get("key"), it.get("value"),
                           _headers(it.get("headers")), md.timestamp))
        return out
    finally:
        kp_close(producer)


def kp_read(bootstrap: str, topic: str, *, start: dict[int, int] | int = 0,
            end: dict[int, int] | None = None, timeout: float = 60.0,
            consumer_config=None) -> list[Rec]:
    """Read each partition of ``topic`` from ``start`` up to ``end`` (default: the end
    offsets at call time) with kafka-python, assign + seek."""
    from kafka import TopicPartition

    consumer = kp_consumer(bootstrap, **(consumer_config or {}))
    try:
        parts = _kp_partitions(consumer, topic, timeout)
        tps = [TopicPartition(topic, p) for p in parts]
        consumer.assign(tps)
        if end is None:
            end = {tp.partition: off for tp, off in consumer.end_offsets(tps).items()}
        starts = start if isinstance(start, dict) else dict.fromkeys(parts, start)
        for tp in tps:
            consumer.seek(tp, starts.get(tp.partition, 0))
        out: list[Rec] = []
        todo = {p for p in parts if starts.get(p, 0) < end[p]}
        deadline = time.monotonic() + timeout
        while todo:
            if time.monotonic() > deadline:
                raise TimeoutError(f"kafka-python read of {topic}: partitions {todo} not done; "
                                   f"got {len(out)} records")
            batch = consumer.poll(timeout_ms=500, max_records=5000)
            for tp, msgs in batch.items():
                for m in msgs:
                    if m.offset < end[tp.partition]:
                        out.append(Rec(tp.partition, m.offset, m.key, m.value,
                                       _headers(m.headers), m.timestamp))
            for p in list(todo):
                if consumer.position(TopicPartition(topic, p)) >= end[p]:
                    todo.discard(p)
        return out
    finally:
        consumer.close()


def _kp_partitions(consumer, topic, timeout):
    deadline = time.monotonic() + timeout
    while True:
        parts = consumer.partitions_for_topic(topic)
        if parts:
            return sorted(parts)
        if time.monotonic() > deadline:
            raise TimeoutError(f"no metadata for topic {topic}")
        time.sleep(0.2)


def kp_end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    from kafka import TopicPartition

    consumer = kp_consumer(bootstrap)
    try:
        parts = _kp_partitions(consumer, topic, 15)
        ends = consumer.end_offsets([TopicPartition(topic, p) for p in parts])
        return {tp.partition: off for tp, off in ends.items()}
    finally:
        consumer.close()


# ---------------------------------------------------------------- confluent-kafka
def ck_config(bootstrap: str, **extra) -> dict:
    cfg = {"bootstrap.servers": bootstrap, "socket.timeout.ms": 15000}
    cfg.update(extra)
    return cfg


def ck_consumer(bootstrap: str, **extra):
    """confluent-kafka consumer: group.id is required by the library, but we only
    ``assign()`` and never commit or store offsets (no group APIs on the server)."""
    from confluent_kafka import Consumer

    cfg = ck_config(
        bootstrap,
        **{
            "group.id": "itest-unused-group",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        },
    )
    cfg.update(extra)
    return Consumer(cfg)


def ck_produce(bootstrap: str, topic: str, items, *, timeout=60.0, **extra) -> list[Rec]:
    from confluent_kafka import Producer

    producer = Producer(ck_config(bootstrap, **extra))
    results: list[tuple[int, object]] = []
    errors = []

    def cb(err, msg, idx):
        if err is not None:
            errors.append((idx, err))
        else:
            results.append((idx, msg))

    items = list(items)
    for i, it in enumerate(items):
        kwargs = {}
        if it.get("partition") is not None:
            kwargs["partition"] = it["partition"]
        if it.get("timestamp_ms") is not None:
            kwargs["timestamp"] = it["timestamp_ms"]
        if it.get("headers"):
            kwargs["headers"] = list(it["headers"])
        while True:
            try:
                producer.produce(topic, value=it.get("value"), key=it.get("key"),
                                 on_delivery=lambda err, msg, i=i: cb(err, msg, i), **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(timeout)
    assert left == 0, f"confluent-kafka: {left} messages not delivered in {timeout}s"
    assert not errors, f"confluent-kafka delivery errors: {errors[:5]}"
    out = []
    for idx, msg in sorted(results, key=lambda r: r[0]):
        it = items[idx]
        out.append(Rec(msg.partition(), msg.offset(), it.get("key"), it.get("value"),
                       _headers(it.get("headers")), msg.timestamp()[1]))
    return out


def ck_read(bootstrap: str, topic: str, partitions, *, start: dict[int, int] | int = 0,
            end: dict[int, int], timeout: float = 60.0, **extra) -> list[Rec]:
    from confluent_kafka import KafkaError, TopicPartition

    starts = start if isinstance(start, dict) else dict.fromkeys(partitions, start)
    consumer = ck_consumer(bootstrap, **extra)
    try:
        consumer.assign([TopicPartition(topic, p, starts.get(p, 0)) for p in partitions])
        todo = {p for p in partitions if starts.get(p, 0) < end[p]}
        out: list[Rec] = []
        deadline = time.monotonic() + timeout
        while todo:
            if time.monotonic() > deadline:
                raise TimeoutError(f"confluent-kafka read of {topic}: partitions {todo} "
                                   f"not done; got {len(out)} records")
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise AssertionError(f"confluent-kafka consumer error: {err}")
                p = msg.partition()
                if msg.offset() < end[p]:
                    out.append(Rec(p, msg.offset(), msg.key(), msg.value(),
                                   _headers(msg.headers()), msg.timestamp()[1]))
                if msg.offset() + 1 >= end[p]:
                    todo.discard(p)
        return out
    finally:
        consumer.close()


# ---------------------------------------------------------------- aiokafka
def aio_run(coro, timeout: float = 120.0):
    async def bounded():
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


async def aio_read(bootstrap: str, topic: str, *, start: dict[int, int] | int = 0,
                   end: dict[int, int] | None = None, timeout: float = 60.0,
                   **config) -> list[Rec]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    cfg = dict(group_id=None, enable_auto_commit=False, auto_offset_reset="earliest",
               request_timeout_ms=15000)
    cfg.update(config)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, **cfg)
    await consumer.start()
    try:
        deadline = time.monotonic() + timeout
        while not (parts := consumer.partitions_for_topic(topic)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"aiokafka: no metadata for {topic}")
            await consumer._client.force_metadata_update()
            await asyncio.sleep(0.2)
        parts = sorted(parts)
        tps = [TopicPartition(topic, p) for p in parts]
        consumer.assign(tps)
        if end is None:
            end = {tp.partition: off for tp, off in (await consumer.end_offsets(tps)).items()}
        starts = start if isinstance(start, dict) else dict.fromkeys(parts, start)
        for tp in tps:
            consumer.seek(tp, starts.get(tp.partition, 0))
        todo = {p for p in parts if starts.get(p, 0) < end[p]}
        out: list[Rec] = []
        while todo:
            if time.monotonic() > deadline:
                raise TimeoutError(f"aiokafka read of {topic}: partitions {todo} not done; "
                                   f"got {len(out)} records")
            batch = await consumer.getmany(timeout_ms=500, max_records=5000)
            for tp, msgs in batch.items():
                for m in msgs:
                    if m.offset < end[tp.partition]:
                        out.append(Rec(tp.partition, m.offset, m.key, m.value,
                                       _headers(m.headers), m.timestamp))
            for p in list(todo):
                if await consumer.position(TopicPartition(topic, p)) >= end[p]:
                    todo.discard(p)
        return out
    finally:
        await consumer.stop()


async def aio_produce(bootstrap: str, topic: str, items, **config) -> list[Rec]:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=15000, **config)
    await producer.start()
    try:
        futs = []
        for it in items:
            # Always an explicit timestamp: aiokafka 0.14's RecordMetadata.timestamp is the
            # first record's timestamp for every record of a batch (CreateTime), so the
            # timestamp we compare against has to be the one we sent.
            ts = it.get("timestamp_ms")
            if ts is None:
                ts = int(time.time() * 1000)
            fut = await producer.send(
                topic, value=it.get("value"), key=it.get("key"),
                headers=list(it.get("headers") or []) or None,
                timestamp_ms=ts, partition=it.get("partition"),
            )
            futs.append((it, ts, fut))
        out = []
        for it, ts, fut in futs:
            md = await fut
            out.append(Rec(md.partition, md.offset, it.get("key"), it.get("value"),
                           _headers(it.get("headers")),
                           md.timestamp if md.timestamp_type == 1 else ts))
        return out
    finally:
        await producer.stop()


# ---------------------------------------------------------------- kcat
def kcat(kcat_bin: str, bootstrap: str, *args: str, input: bytes | None = None,
         timeout: float = 60.0, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``kcat -b BOOTSTRAP ARGS`` (bounded by ``timeout``)."""
    cmd = [kcat_bin, "-b", bootstrap, "-X", "socket.timeout.ms=15000", *args]
    proc = subprocess.run(cmd, input=input, capture_output=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} exited {proc.returncode}\nstdout: {proc.stdout[-3000:]!r}\n"
            f"stderr: {proc.stderr[-3000:].decode(errors='replace')}"
        )
    return proc


def kcat_json_records(stdout: bytes) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def kcat_rec(d: dict) -> Rec:
    """One ``kcat -C -J`` line as a Rec. kcat prints headers as a flat
    ``[name, value, name, value, ...]`` list of strings."""
    hdrs = d.get("headers") or []
    if hdrs and isinstance(hdrs[0], str):
        pairs = tuple((hdrs[i], _kcat_bytes(hdrs[i + 1])) for i in range(0, len(hdrs), 2))
    else:  # tolerate a list of objects
        pairs = tuple((h["key"] if "key" in h else h["name"], _kcat_bytes(h["value"]))
                      for h in hdrs)
    return Rec(d["partition"], d["offset"], _kcat_bytes(d.get("key")),
               _kcat_bytes(d.get("payload")), pairs, d["ts"])


def _kcat_bytes(v):
    if v is None:
        return None
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, dict) and "base64" in v:  # not used by kcat 1.7; kept defensive
        return base64.b64decode(v["base64"])
    return str(v).encode()


def kp_send_each(bootstrap: str, topic: str, count: int, value: bytes = b"v" * 100) -> None:
    """``count`` records of ``value`` to partition 0, each one acknowledged (acks=1)
    before the next is sent."""
    producer = kp_producer(bootstrap, linger_ms=0, acks=1)
    try:
        for _ in range(count):
            producer.send(topic, value=value, partition=0).get(timeout=30)
    finally:
        kp_close(producer)
