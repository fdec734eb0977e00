"""The Kafka side of the MQTT bridge tests, with kafka-python: reading back what the
bridge wrote to a topic, and producing the commands the bridge delivers to devices."""

from __future__ import annotations

import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def log_records(bootstrap: str, topic: str) -> list:
    """Every record of ``topic`` up to its end offsets now (exact: no waiting for more)."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or ())]
        if not tps:
            return []
        c.assign(tps)
        c.seek_to_beginning(*tps)
        end = c.end_offsets(tps)
        out: list = []
        deadline = time.monotonic() + 15
        while any(c.position(tp) < end[tp] for tp in tps) and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=200).values():
                out.extend(recs)
        return out
    finally:
        c.close()


def produce_commands(bootstrap: str, key: bytes, values: list[bytes]) -> None:
    """Produce ``values`` under ``key`` to the ``commands`` topic (downlink to devices)."""
    p = KafkaProducer(bootstrap_servers=bootstrap)
    for v in values:
        p.send("commands", key=key, value=v)
    p.flush()
    p.close()


def read_topic(bootstrap: str, topic: str, expect: int, timeout: float = 20.0) -> list:
    """Every record of ``topic`` (all partitions), waiting for at least ``expect``."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        parts = None
        deadline = time.monotonic() + timeout
        while not parts and time.monotonic() < deadline:
            parts = consumer.partitions_for_topic(topic)
            time.sleep(0.05 if not parts else 0)
        tps = [TopicPartition(topic, p) for p in sorted(parts or ())]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: list = []
        while len(out) < expect and time.monotonic() < deadline:
            for recs in consumer.poll(timeout_ms=200).values():
                out.extend(recs)
        return out
    finally:
        consumer.close()
