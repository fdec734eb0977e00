"""The well-behaved client measured while the network fuzzer runs, producing and consuming
the same topic the fuzzer writes its hostile batches into.

kafka-python produces for ``seconds`` (acks=all, flushed every ``chunk`` records), while a
consumer (assign from the beginning, no group) reads every partition; afterwards it waits
until the consumer has seen every acknowledged record. A consumer error (a batch the
broker should not have stored) is recorded.

The consumer is confluent-kafka (librdkafka, with CRC checks) by default. kafka-python's
consumer reads each record's attributes byte as a varint (Kafka: an unused int8), so a
record whose attributes byte is >= 0x80 -- valid for Kafka, which stores it, and for
librdkafka and Java -- makes it raise CorruptRecordError; the network fuzzer's byte flips
produce such records. ``consumer="kafka-python"`` shows that.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from helpers.clienthelpers import ck_consumer, kp_close, kp_consumer, kp_producer


@dataclass
class HealthyResult:
    produced: int = 0
    produce_seconds: float = 0.0
    consumed: int = 0
    missing: int = 0
    foreign_records: int = 0  # the fuzzer's accepted (valid) records, seen along the way
    errors: list[str] = field(default_factory=list)
    catch_up_seconds: float = 0.0

    @property
    def produce_rate(self) -> float:
        return self.produced / self.produce_seconds if self.produce_seconds else 0.0

    def to_json(self) -> dict[str, object]:
        return {"produced": self.produced, "produce_seconds": round(self.produce_seconds, 2),
                "produce_rate": round(self.produce_rate, 1), "consumed": self.consumed,
                "missing": self.missing, "foreign_records": self.foreign_records,
                "errors": self.errors[:5], "catch_up_seconds": round(self.catch_up_seconds, 2)}


class _Consumer(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, partitions: int, library: str) -> None:
        super().__init__(name="healthy-consumer", daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.library = library
        self.seen: dict[tuple[int, int], tuple[bytes | None, bytes | None]] = {}
        self.errors: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            if self.library == "kafka-python":
                self._kafka_python()
            else:
                self._confluent()
        except Exception as exc:  # noqa: BLE001  (reported: a corrupt batch reached a client)
            self.errors.append(f"{self.library} consumer: {exc!r}")

    def _kafka_python(self) -> None:
        from kafka import TopicPartition

        consumer = kp_consumer(self.bootstrap, fetch_max_wait_ms=100)
        try:
            tps = [TopicPartition(self.topic, p) for p in range(self.partitions)]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            while not self.stop.is_set():
                for tp, messages in consumer.poll(timeout_ms=200, max_records=5000).items():
                    for m in messages:
                        self.seen[(tp.partition, m.offset)] = (m.key, m.value)
        finally:
            consumer.close()

    def _confluent(self) -> None:
        from confluent_kafka import KafkaError, TopicPartition

        consumer = ck_consumer(self.bootstrap, **{"check.crcs": True, "fetch.wait.max.ms": 100})
        try:
            consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
            while not self.stop.is_set():
                for msg in consumer.consume(num_messages=5000, timeout=0.2):
                    err = msg.error()
                    if err is not None:
                        if err.code() != KafkaError._PARTITION_EOF:
                            self.errors.append(f"confluent-kafka consumer: {err}")
                        continue
                    self.seen[(msg.partition(), msg.offset())] = (msg.key(), msg.value())
        finally:
            consumer.close()


def run_healthy(bootstrap: str, topic: str, partitions: int, seconds: float, *,
                consumer_library: str = "confluent-kafka", chunk: int = 200,
                value_size: int = 100, catch_up_timeout: float = 60.0) -> HealthyResult:
    result = HealthyResult()
    consumer = _Consumer(bootstrap, topic, partitions, consumer_library)
    consumer.start()
    producer = kp_producer(bootstrap, acks="all", linger_ms=5)
    acked: dict[tuple[int, int], tuple[bytes, bytes]] = {}
    sequence = 0
    started = time.monotonic()
    try:
        while time.monotonic() - started < seconds:
            futures = []
            for _ in range(chunk):
                key = b"healthy-%d" % sequence
                value = (b"%d:" % sequence).ljust(value_size, b".")
                futures.append((key, value, producer.send(topic, key=key, value=value)))
                sequence += 1
            producer.flush(timeout=60)
            for key, value, future in futures:
                md = future.get(timeout=60)
                acked[(md.partition, md.offset)] = (key, value)
        result.produce_seconds = time.monotonic() - started
    except Exception as exc:  # noqa: BLE001
        result.errors.append(f"producer: {exc!r}")
        result.produce_seconds = time.monotonic() - started
    finally:
        kp_close(producer)
    result.produced = len(acked)
    wait_started = time.monotonic()
    deadline = wait_started + catch_up_timeout
    while time.monotonic() < deadline and consumer.is_alive():
        if all(where in consumer.seen for where in acked):
            break
        time.sleep(0.05)
    result.catch_up_seconds = time.monotonic() - wait_started
    consumer.stop.set()
    consumer.join(timeout=30)
    result.errors += consumer.errors
    seen = dict(consumer.seen)
    result.consumed = sum(1 for where in acked if seen.get(where) == acked[where])
    result.missing = len(acked) - result.consumed
    result.foreign_records = sum(1 for key, _ in seen.values()
                                 if not (key or b"").startswith(b"healthy-"))
    return result
