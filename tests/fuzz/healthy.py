"""The well-behaved client measured while the network fuzzer runs: kafka-python, producing
and consuming the same topic the fuzzer writes its hostile batches into.

It produces for ``seconds`` (acks=all, flushed every ``chunk`` records), while a consumer
(assign + seek to the beginning, no group) reads every partition; afterwards it waits until
the consumer has seen every acknowledged record. kafka-python raises on a corrupt batch, so
a hostile batch the broker stored would surface here as an error.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from clienthelpers import kp_close, kp_consumer, kp_producer


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
    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(name="healthy-consumer", daemon=True)
        from kafka import TopicPartition

        self.consumer = kp_consumer(bootstrap, fetch_max_wait_ms=100)
        self.tps = [TopicPartition(topic, p) for p in range(partitions)]
        self.consumer.assign(self.tps)
        self.consumer.seek_to_beginning(*self.tps)
        self.seen: dict[tuple[int, int], tuple[bytes | None, bytes | None]] = {}
        self.errors: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                for tp, messages in self.consumer.poll(timeout_ms=200, max_records=5000).items():
                    for m in messages:
                        self.seen[(tp.partition, m.offset)] = (m.key, m.value)
        except Exception as exc:  # noqa: BLE001  (reported: a corrupt batch reached a client)
            self.errors.append(f"consumer: {exc!r}")
        finally:
            self.consumer.close()


def run_healthy(bootstrap: str, topic: str, partitions: int, seconds: float, *,
                chunk: int = 200, value_size: int = 100, catch_up_timeout: float = 60.0) -> HealthyResult:
    result = HealthyResult()
    consumer = _Consumer(bootstrap, topic, partitions)
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
