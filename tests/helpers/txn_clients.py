"""confluent-kafka clients for the transaction tests against one server: topics,
transactional producers, and reading a topic with either isolation level."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

DEADLINE_S = 30.0


def create_topics(server, *topics: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    futures = admin.create_topics([NewTopic(t, partitions, 1) for t in topics])
    for future in futures.values():
        future.result(10)


def txn_producer(server, txn_id: str, **extra: object) -> Producer:
    conf = {"bootstrap.servers": server.bootstrap, "transactional.id": txn_id,
            "linger.ms": 5, **extra}
    producer = Producer(conf)
    producer.init_transactions(15)
    return producer


def consume_all(server, topic: str, isolation: str, expected: int | None = None,
                 quiet_s: float = 2.0) -> list[bytes]:
    """Read ``topic`` from the start; stop at ``expected`` values, or after ``quiet_s``
    without a message once every partition reported its end."""
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": f"r-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": isolation, "enable.partition.eof": True})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    last = time.monotonic()
    eof: set[int] = set()
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                if eof and time.monotonic() - last > quiet_s and expected is None:
                    break
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(msg.partition())
                    continue
                raise KafkaException(msg.error())
            last = time.monotonic()
            values.append(msg.value())
            if expected is not None and len(values) >= expected:
                break
    finally:
        consumer.close()
    return values
