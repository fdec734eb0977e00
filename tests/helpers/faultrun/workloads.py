"""The fault run's clients, each a thread recording into one ``History``.

- ``PlainProducer``: idempotent acks=all producer (confluent-kafka or kafka-python)
  writing ``NAME:SEQ`` round-robin over the partitions; records every acknowledgement.
- ``TxnProducer``: confluent-kafka transactions spanning every partition of a topic, each
  sending a source offset to a group (``send_offsets_to_transaction``) whose coordinator
  was chosen on another broker; commits or (one in four) aborts; records outcomes.
- ``CommittingConsumer``: a subscribed group member committing its position after every
  poll (synchronously, never below a commit it already made).
- ``Observer``: reads the groups' committed offsets and the log end of every partition
  again and again, the reads the checker holds against acknowledged writes.

Client errors during faults are expected: they are counted, never retried into a
different record (an unacknowledged record may or may not be in the log).
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections import Counter
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from .history import (
    ABORTED,
    COMMITTED,
    UNKNOWN,
    Ack,
    CommitAck,
    EndRead,
    History,
    OffsetRead,
    Txn,
    plain_value,
    txn_value,
)

log = logging.getLogger(__name__)


class Worker:
    """A daemon thread running ``loop()`` until ``stop()``; errors counted by kind."""

    def __init__(self, name: str, history: History) -> None:
        self.name = name
        self.history = history
        self.errors: Counter[str] = Counter()
        self.progress = 0  # successful operations, for "is it still making progress"
        self.crashed: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name=f"faultrun-{name}", daemon=True)

    def start(self) -> Worker:
        self._thread.start()
        return self

    def stop(self, timeout: float = 150) -> None:
        self._stop.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            self.errors["did not stop"] += 1

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _main(self) -> None:
        try:
            self.loop()
        except BaseException as exc:  # reported by the run, never lost in a thread
            log.exception("%s crashed", self.name)
            self.crashed = exc

    def loop(self) -> None:
        raise NotImplementedError

    def error(self, what: object) -> None:
        self.errors[str(what)[:80]] += 1


class PlainProducer(Worker):
    def __init__(self, name: str, history: History, bootstrap: str, topic: str,
                 partitions: int, client: str = "confluent-kafka") -> None:
        super().__init__(name, history)
        self.bootstrap, self.topic, self.partitions, self.client = bootstrap, topic, partitions, client
        self.sent = 0

    def _acked(self, partition: int, offset: int, value: bytes) -> None:
        self.history.acks.append(Ack(partition, offset, value, time.monotonic()))
        self.progress += 1

    def loop(self) -> None:
        if self.client == "kafka-python":
            self._kafka_python()
            return
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5,
                             "message.timeout.ms": 180000,
                             "topic.metadata.refresh.interval.ms": 1000,
                             **_debug_conf("FAULTRUN_PLAIN_DEBUG", self.name)})

        def delivered(err: Any, msg: Any) -> None:
            if err is None:
                self._acked(msg.partition(), msg.offset(), msg.value())
            else:
                self.error(err)

        while not self.stopping:
            value = plain_value(self.name, self.sent)
            try:
                producer.produce(self.topic, value=value, partition=self.sent % self.partitions,
                                 on_delivery=delivered)
                self.sent += 1
            except BufferError:
                pass
            producer.poll(0.005)
        left = producer.flush(180)
        if left:
            self.errors["undelivered at the end"] += left

    def _kafka_python(self) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all",
                                 enable_idempotence=True, linger_ms=5, retries=2**31 - 1,
                                 delivery_timeout_ms=180000, request_timeout_ms=10000,
                                 metadata_max_age_ms=1000)
        try:
            while not self.stopping:
                value = plain_value(self.name, self.sent)
                future = producer.send(self.topic, value=value, partition=self.sent % self.partitions)
                future.add_callback(lambda md, v=value: self._acked(md.partition, md.offset, v))
                future.add_errback(lambda exc: self.error(repr(exc)))
                self.sent += 1
                time.sleep(0.005)
            producer.flush(180)
        finally:
            producer.close(10)


class TxnProducer(Worker):
    def __init__(self, history: History, bootstrap: str, topic: str, partitions: int,
                 txn_id: str, group: str, source: TopicPartition, seed: int) -> None:
        super().__init__("txn", history)
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.txn_id, self.group, self.source = txn_id, group, source
        self.rng = random.Random(seed)
        self.number = 0
        self.undelivered: Counter[int] = Counter()  # transaction -> records that failed delivery

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            number = int(msg.value().split(b":")[0][1:])
            self.undelivered[number] += 1
            self.error(f"delivery: {err.name()}")

    def _new(self) -> Producer:
        return Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.txn_id,
                         "transaction.timeout.ms": 10000, "message.timeout.ms": 10000,
                         "linger.ms": 5, "topic.metadata.refresh.interval.ms": 1000,
                         **_debug_conf("FAULTRUN_TXN_DEBUG", "txn")})

    def _producer(self) -> Producer:
        """A producer with its transactional id initialised (fencing any earlier one)."""
        producer = self._new()
        while not self.stopping:
            try:
                producer.init_transactions(15)
                return producer
            except KafkaException as exc:
                self.error(f"init: {exc.args[0].name()}")
                if exc.args[0].fatal():
                    producer = self._new()
        raise _Stopped

    def loop(self) -> None:
        meta_consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group})
        try:
            group_meta = meta_consumer.consumer_group_metadata()
            producer = self._producer()
            while not self.stopping:
                outcome = self._one(producer, group_meta)
                if outcome is None:  # fatal: a new producer fences the old one
                    producer = self._producer()
        except _Stopped:
            pass
        finally:
            meta_consumer.close()

    def _one(self, producer: Producer, group_meta: Any) -> str | None:
        number, self.number = self.number, self.number + 1
        sent_offset = number + 1
        abort = self.rng.random() < 0.25
        step = "begin"
        try:
            producer.begin_transaction()
            step = "produce"
            for partition in range(self.partitions):
                producer.produce(self.topic, value=txn_value(number, partition), partition=partition,
                                 on_delivery=self._delivered)
            step = "send offsets"
            _retrying(lambda: producer.send_offsets_to_transaction(
                [TopicPartition(self.source.topic, self.source.partition, sent_offset)],
                group_meta, 10), self)
            step = "end"
            if abort:
                _retrying(lambda: producer.abort_transaction(10), self)
                return self._record(number, sent_offset, ABORTED)
            _retrying(lambda: producer.commit_transaction(10), self)
            if self.undelivered[number]:
                # Told "committed" with records that failed delivery: seen once (seed 7 of
                # the long run, right after a retried abort_transaction) with librdkafka;
                # counted, and the outcome left to the checker's all-or-nothing rule.
                self.error("committed with records that failed delivery")
                return self._record(number, sent_offset, UNKNOWN)
            return self._record(number, sent_offset, COMMITTED)
        except KafkaException as exc:
            err = exc.args[0]
            self.error(f"{step}: {err.name()}")
            if err.txn_requires_abort():
                try:
                    _retrying(lambda: producer.abort_transaction(10), self)
                    return self._record(number, sent_offset, ABORTED)
                except KafkaException as again:
                    self.error(f"abort: {again.args[0].name()}")
                except _Stuck as again:
                    self.error(f"abort: stuck ({again}): new producer")
            # fatal, stuck (retried past STUCK_AFTER_S) or abort impossible: the outcome
            # is the coordinator's to decide; a new producer fences this one
            if err.retriable() and not err.txn_requires_abort():
                self.error(f"{step}: stuck ({err.name()} for {STUCK_AFTER_S:.0f} s): new producer")
            self._record(number, sent_offset, UNKNOWN)
            return None
        except _Stuck as exc:
            self.error(f"{step}: stuck ({exc}): new producer")
            self._record(number, sent_offset, UNKNOWN)
            return None

    def _record(self, number: int, sent_offset: int, outcome: str) -> str:
        now = time.monotonic()
        self.history.txns.append(Txn(number, tuple(range(self.partitions)), sent_offset, outcome, now))
        if outcome == COMMITTED:
            self.history.commits.append(CommitAck(self.group, self.source.partition, sent_offset, now))
            self.progress += 1
        return outcome


def _debug_conf(variable: str, name: str) -> dict[str, Any]:
    """With FAULTRUN_TXN_DEBUG=FILE (the transactional producer) or
    FAULTRUN_PLAIN_DEBUG=FILE (the confluent-kafka idempotent producer), that producer's
    librdkafka debug log (eos, msg, protocol, broker: every batch's sequence, each
    Produce answer and whether librdkafka took it for persisted, epoch bumps, and the
    ADVBASE lines of an abort's purge) goes to FILE, to read a violation against what
    the client was told."""
    path = os.environ.get(variable)
    if not path:
        return {}
    dbg = logging.getLogger(f"faultrun.{name}.rdkafka")
    if not dbg.handlers:
        handler = logging.FileHandler(path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        dbg.addHandler(handler)
        dbg.setLevel(logging.DEBUG)
        dbg.propagate = False
    return {"debug": "eos,msg,protocol,broker", "logger": dbg}


class _Stopped(Exception):
    pass


#: How long one transactional call is retried, and how long one call may block, before
#: its producer counts as stuck. With librdkafka 2.16, after brokers had left the
#: brokers Metadata lists (a session lost past its timeout: a network partition, etcd
#: killed) a send_offsets_to_transaction(timeout 10 s) was seen blocked for minutes, and
#: once timing out on every call for 300 s, after its AddOffsetsToTxn was answered and
#: while no broker held any request of it or received its TxnOffsetCommit (the brokers'
#: request metrics). A new producer with the same transactional id fences the stuck one
#: and the coordinator aborts its open transaction (InitProducerId); counted among the
#: worker's errors as "stuck". The stuck call is left to its thread.
STUCK_AFTER_S = 30.0


class _Stuck(Exception):
    pass


def _bounded(call: Any, within_s: float) -> None:
    """``call()`` in a thread of its own; _Stuck if it has not returned in ``within_s``."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, name="faultrun-txn-call", daemon=True)
    thread.start()
    thread.join(within_s)
    if not outcome:
        raise _Stuck(f"a transactional call blocked for {within_s:.0f} s")
    if outcome[0] is not None:
        raise outcome[0]


def _retrying(call: Any, worker: Worker, within_s: float = STUCK_AFTER_S) -> None:
    """``call()`` again while it fails with a retriable error (a timeout, a coordinator
    moving), as the client's documentation says to; other errors go to the caller, and
    so does a retriable one once ``within_s`` has passed: the producer is then deemed
    stuck (the caller replaces it, which fences it)."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            _bounded(call, within_s)
            return
        except KafkaException as exc:
            err = exc.args[0]
            if not err.retriable() or err.txn_requires_abort() or time.monotonic() >= deadline:
                raise
            worker.error(f"retry: {err.name()}")


class CommittingConsumer(Worker):
    def __init__(self, history: History, bootstrap: str, topic: str, group: str) -> None:
        super().__init__("committer", history)
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.committed: dict[int, int] = {}  # never commit below what was committed

    def loop(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        consumer.subscribe([self.topic])
        try:
            while not self.stopping:
                positions: dict[int, int] = {}
                for msg in consumer.consume(500, 0.2):
                    if msg.error() is None:
                        positions[msg.partition()] = msg.offset() + 1
                    else:
                        self.error(msg.error().name())
                wanted = {p: o for p, o in positions.items() if o > self.committed.get(p, -1)}
                if not wanted:
                    continue
                try:
                    consumer.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in wanted.items()],
                                    asynchronous=False)
                except KafkaException as exc:
                    self.error(exc.args[0].name())
                    continue
                now = time.monotonic()
                for p, o in wanted.items():
                    self.committed[p] = o
                    self.history.commits.append(CommitAck(self.group, p, o, now))
                self.progress += 1
        finally:
            consumer.close()


class Observer(Worker):
    """Committed offsets of ``groups`` (each with its topic partitions) and the log end of
    ``topic``'s partitions, read in turn by one thread (so reads are ordered in time)."""

    def __init__(self, history: History, bootstrap: str, topic: str, partitions: int,
                 groups: dict[str, list[TopicPartition]]) -> None:
        super().__init__("observer", history)
        self.bootstrap, self.topic, self.partitions, self.groups = bootstrap, topic, partitions, groups

    def loop(self) -> None:
        consumers = {g: Consumer({"bootstrap.servers": self.bootstrap, "group.id": g,
                                  "enable.auto.commit": False}) for g in self.groups}
        try:
            while not self.stopping:
                for group, consumer in consumers.items():
                    start = time.monotonic()
                    try:
                        found = consumer.committed(self.groups[group], timeout=5)
                    except KafkaException as exc:
                        self.error(f"committed: {exc.args[0].name()}")
                        continue
                    for tp in found:
                        if tp.error is None and tp.offset >= 0:
                            self.history.offset_reads.append(OffsetRead(group, tp.partition, tp.offset, start))
                    self.progress += 1
                any_consumer = next(iter(consumers.values()))
                for partition in range(self.partitions):
                    start = time.monotonic()
                    try:
                        _, high = any_consumer.get_watermark_offsets(
                            TopicPartition(self.topic, partition), timeout=5, cached=False)
                    except KafkaException as exc:
                        self.error(f"end offset: {exc.args[0].name()}")
                        continue
                    self.history.end_reads.append(EndRead(partition, high, start))
                time.sleep(0.05)  # a pace, not a wait: reads go on all run long
        finally:
            for consumer in consumers.values():
                consumer.close()


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str,
             timeout: float = 90) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of ``topic`` visible with ``isolation``, partition by partition: read
    until each partition's position reaches the log end asked for first."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"faultrun-read-{time.monotonic()}",
                         "enable.auto.commit": False, "isolation.level": isolation,
                         "enable.partition.eof": False})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)[1]
                for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + timeout
        while True:
            for msg in consumer.consume(1000, 0.2):
                if msg.error() is None:
                    out[msg.partition()].append((msg.offset(), msg.value()))
            done = consumer.position([TopicPartition(topic, p) for p in range(partitions)])
            if all(ends[tp.partition] == 0 or tp.offset >= ends[tp.partition] for tp in done):
                return out
            if time.monotonic() > deadline:
                raise AssertionError(f"read of {topic} ({isolation}) stuck at "
                                     f"{[(tp.partition, tp.offset) for tp in done]}, ends {ends}")
    finally:
        consumer.close()
