"""Read a topic with kafka-python and turn the records into a Kafka-source DataFrame.

Used where Spark's Kafka connector jars are missing: by the demo's batch fallback and
by the tests. The DataFrame has exactly the schema of ``read.format("kafka")`` with
``includeHeaders=true`` and the same values (key/value bytes as the log serves them,
CreateTime/LogAppendTime ids, ``null`` headers for a record without any), so the
transformations in ``transforms.py`` cannot tell it from the real source.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from .schemas import KAFKA_SOURCE_SCHEMA, KAFKA_SOURCE_SCHEMA_NO_HEADERS

log = logging.getLogger(__name__)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# kafka-python's ConsumerRecord, or anything with the same attributes.
Record = Any


def fetch_records(
    bootstrap_servers: str,
    topic: str,
    *,
    timeout_s: float = 30.0,
    min_records: int = 0,
    progress: Callable[[int], None] | None = None,
) -> list[Record]:
    """Every record of ``topic`` from the earliest offset until caught up with the end
    offsets (and at least ``min_records``): assign + seek + poll, as Spark's executors do.
    """
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        client_id="spark-examples-fetch",
    )
    try:
        deadline = time.monotonic() + timeout_s
        parts: set[int] | None = None
        while not parts:
            parts = consumer.partitions_for_topic(topic)
            if not parts:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"topic {topic!r} has no partitions on {bootstrap_servers}")
                time.sleep(0.2)
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: list[Record] = []
        while True:
            ends = consumer.end_offsets(tps)
            done = all(consumer.position(tp) >= ends[tp] for tp in tps)
            if done and len(out) >= min_records:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"read {len(out)} records of {topic!r} in {timeout_s:.0f}s "
                    f"(wanted the end offsets {dict((tp.partition, o) for tp, o in ends.items())}"
                    f" and at least {min_records})"
                )
            batch = consumer.poll(timeout_ms=500, max_records=10_000)
            for recs in batch.values():
                out.extend(recs)
            if progress is not None:
                progress(len(out))
        out.sort(key=lambda r: (r.partition, r.offset))
        return out
    finally:
        consumer.close()


def kafka_timestamp(ms: int) -> datetime:
    """Epoch milliseconds -> aware datetime, exact (no float rounding)."""
    return _EPOCH + timedelta(milliseconds=ms)


def record_to_row(record: Record, include_headers: bool = True) -> tuple:
    """One kafka-python ConsumerRecord -> one row of the Kafka source schema."""
    row: tuple = (
        record.key,
        record.value,
        record.topic,
        record.partition,
        record.offset,
        kafka_timestamp(record.timestamp),
        record.timestamp_type,
    )
    if include_headers:
        headers = [(k, v) for k, v in (record.headers or [])]
        row += (headers or None,)
    return row


def records_to_frame(
    spark: SparkSession, records: Iterable[Record], *, include_headers: bool = True
) -> DataFrame:
    """A DataFrame with the Kafka source's exact schema, holding these records."""
    schema = KAFKA_SOURCE_SCHEMA if include_headers else KAFKA_SOURCE_SCHEMA_NO_HEADERS
    rows = [record_to_row(r, include_headers) for r in records]
    return spark.createDataFrame(rows, schema)


def produce_messages(
    bootstrap_servers: str,
    topic: str,
    messages: Sequence[tuple[str | bytes | None, str | bytes]],
) -> int:
    """Write (key, value) pairs with kafka-python as the Spark sink would (acks=all,
    idempotent); the demo's fallback for ``writeStream.format("kafka")``."""
    from kafka import KafkaProducer

    def b(x: str | bytes | None) -> bytes | None:
        return x.encode() if isinstance(x, str) else x

    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, acks="all", linger_ms=5)
    try:
        futures = [producer.send(topic, key=b(k), value=b(v)) for k, v in messages]
        producer.flush(timeout=30)
        for f in futures:
            f.get(timeout=30)
        return len(futures)
    finally:
        producer.close(timeout=10)
