"""Real clients against a test cluster (tests/helpers/clusterprocs.py): creating a
topic and waiting for its replicas to be in sync, reading it back with confluent-kafka,
producer threads that record what was acknowledged while brokers are killed."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from kafka import KafkaProducer

from helpers.clusterprocs import Cluster
from helpers.waiting import wait_until


def create(cluster: Cluster, topic: str, partitions: int = 3, rf: int = 3,
           timeout: float = 20) -> None:
    """Create ``topic``; return once every partition's replicas are all in sync."""
    admin = cluster.admin()  # kept alive until its futures are done
    futures = admin.create_topics([NewTopic(topic, partitions, rf)])
    futures[topic].result(timeout=20)
    wait_until(lambda: all((p := cluster.partition(topic, i)) is not None and len(p.isrs) == rf
                           for i in range(partitions)), timeout,
               f"{topic} to have its replicas in sync")


def consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 30) -> list[tuple[int, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                out.append((message.offset(), message.value()))
        return out
    finally:
        consumer.close()


class ContinuousProducer:
    """A producer thread writing numbered records until stopped; what was acknowledged."""

    def __init__(self, kind: str, bootstrap: str, topic: str) -> None:
        self.kind, self.bootstrap, self.topic = kind, bootstrap, topic
        self.acked: list[bytes] = []
        self.ack_times: list[float] = []  # time.monotonic() of each acknowledgement
        self.failed: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"producer-{kind}", daemon=True)

    def _delivered(self, err, message) -> None:
        if err is None:
            self.acked.append(message.value())
            self.ack_times.append(time.monotonic())
        else:
            self.failed.append(str(err))

    def _run(self) -> None:
        if self.kind == "confluent-kafka":
            producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                                 "enable.idempotence": True, "linger.ms": 5,
                                 "message.timeout.ms": 120000})
            i = 0
            while not self.stop.is_set():
                producer.produce(self.topic, value=f"{i:07d}".encode(), partition=0,
                                 on_delivery=self._delivered)
                producer.poll(0.005)
                i += 1
            assert producer.flush(120) == 0
        else:
            kp = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all",
                               enable_idempotence=True, linger_ms=5, retries=2**31 - 1,
                               delivery_timeout_ms=120000, request_timeout_ms=10000)
            i = 0
            while not self.stop.is_set():
                value = f"{i:07d}".encode()
                future = kp.send(self.topic, value=value, partition=0)
                future.add_callback(lambda _, v=value: (self.acked.append(v),
                                                        self.ack_times.append(time.monotonic())))
                future.add_errback(lambda exc: self.failed.append(repr(exc)))
                time.sleep(0.005)
                i += 1
            kp.flush(120)
            kp.close(10)

    def __enter__(self) -> ContinuousProducer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(150)


def log_bytes(broker, topic: str) -> bytes:
    return b"".join(f.read_bytes() for f in broker.segment_files(topic, 0))


def wait_for_progress(producers: list[ContinuousProducer]) -> None:
    before = [len(p.acked) for p in producers]
    wait_until(lambda: all(len(p.acked) > n + 20 for p, n in zip(producers, before, strict=True)),
               60, "every producer to have more records acknowledged")


def produce_partitions(bootstrap: str, topic: str, values: list[tuple[int, bytes]]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    errors: list[object] = []
    for partition, value in values:
        p.produce(topic, value, partition=partition,
                  on_delivery=lambda err, _msg: errors.append(err) if err else None)
    assert p.flush(30) == 0
    assert errors == []


def consume_partitions(bootstrap: str, topic: str, partitions: int, expected: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic()}",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
        out: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(out) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                out.append(message.value())
        return out
    finally:
        consumer.close()
