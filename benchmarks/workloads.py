"""Kafka-client workloads: one function each, run against any target's bootstrap.

Each workload is bounded twice, by a record count and by a time cap, so a slow or stuck
server costs at most the cap. Figures count payload bytes (record values) only, so MB/s
means the same thing for every server and compares directly with the raw baselines.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from .progress import NULL_PROGRESS, Progress

log = logging.getLogger(__name__)
librdkafka_log = logging.getLogger("benchmarks.librdkafka")

MB = 1_000_000  # MB/s throughout is 10^6 bytes per second
_PURGED = {KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT}


class WorkloadError(RuntimeError):
    """A workload could not run at all (as opposed to running slowly)."""


@dataclass
class Settings:
    """Run-wide knobs, the same for every target so their figures compare."""

    records: dict[int, int]  # record size -> records per workload
    time_cap: float  # seconds per workload, on top of the record count
    partitions: int = 1
    acks: str = "1"
    linger_ms: int = 5
    run_id: str = field(default_factory=lambda: os.urandom(4).hex())


@dataclass
class Session:
    """One target's share of a run: where it listens and what earlier workloads left."""

    target: str
    bootstrap: str
    settings: Settings
    progress: Progress = NULL_PROGRESS
    #: record size -> (topic, records acknowledged) that produce left for fetch to read.
    topics: dict[int, tuple[str, int]] = field(default_factory=dict)
    #: Distinct errors librdkafka reported (connection refused, brokers down...).
    client_errors: list[str] = field(default_factory=list)


@dataclass
class WorkloadResult:
    """One workload's figures on one target."""

    workload: str
    kind: str
    target: str
    record_size: int
    partitions: int
    records_requested: int
    records: int
    bytes: int
    seconds: float
    records_per_s: float
    mb_per_s: float
    capped: bool  # stopped by the time cap before the record count
    errors: int = 0
    note: str | None = None
    config: dict[str, object] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        """The JSON form written to the result file."""
        return asdict(self)


def size_label(size: int) -> str:
    """100 -> '100B', 1024 -> '1KiB'."""
    return f"{size >> 10}KiB" if size >= 1024 and size % 1024 == 0 else f"{size}B"


def _client_config(session: Session) -> dict[str, object]:
    def on_error(err: KafkaError) -> None:
        # librdkafka retries transport errors itself; say each kind once, not per retry.
        text = err.str()
        if text not in session.client_errors:
            session.client_errors.append(text)
            log.warning("%s client: %s", session.target, text)

    return {
        "bootstrap.servers": session.bootstrap,
        "client.id": "logserver-bench",
        "broker.address.family": "v4",
        "socket.nagle.disable": True,
        "logger": librdkafka_log,
        "error_cb": on_error,
    }


def _result(
    session: Session,
    kind: str,
    size: int,
    records: int,
    seconds: float,
    capped: bool,
    config: dict[str, object],
    errors: int = 0,
    note: str | None = None,
    nbytes: int | None = None,
) -> WorkloadResult:
    nbytes = records * size if nbytes is None else nbytes
    return WorkloadResult(
        workload=f"{kind}-{size_label(size)}",
        kind=kind,
        target=session.target,
        record_size=size,
        partitions=session.settings.partitions,
        records_requested=session.settings.records[size],
        records=records,
        bytes=nbytes,
        seconds=round(seconds, 4),
        records_per_s=round(records / seconds, 1) if seconds > 0 else 0.0,
        mb_per_s=round(nbytes / seconds / MB, 2) if seconds > 0 else 0.0,
        capped=capped,
        errors=errors,
        note=note,
        config={k: v for k, v in config.items() if isinstance(v, str | int | float | bool)},
    )


def create_topic(session: Session, topic: str, timeout: float = 30.0) -> None:
    """Creates ``topic`` and waits until metadata shows a leader for every partition."""
    partitions = session.settings.partitions
    admin = AdminClient(_client_config(session))
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
        operation_timeout=timeout / 2,
        request_timeout=timeout / 2,
    )
    try:
        futures[topic].result(timeout=timeout)
    except KafkaException as exc:
        err = exc.args[0]
        if not (isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS):
            raise WorkloadError(f"CreateTopics {topic}: {err}") from exc
    deadline = time.monotonic() + timeout
    while True:
        meta = admin.list_topics(topic, timeout=5).topics.get(topic)
        if (
            meta is not None
            and meta.error is None
            and len(meta.partitions) == partitions
            and all(p.leader >= 0 for p in meta.partitions.values())
        ):
            return
        if time.monotonic() >= deadline:
            raise WorkloadError(
                f"topic {topic} has no leader for every partition after {timeout:g}s"
            )
        time.sleep(0.1)


def produce_throughput(session: Session, size: int) -> WorkloadResult:
    """Records/s acknowledged by the server for one producer sending ``size``-byte values.

    The producer is tuned for throughput (large batches, ``linger.ms`` 5, a bounded local
    queue so a slow server pushes back instead of the client buffering the whole run).
    Only failed deliveries call back into Python: per-record callbacks would measure the
    client, not the server.
    """
    settings = session.settings
    records = settings.records[size]
    topic = f"bench-{settings.run_id}-{size_label(size).lower()}"
    create_topic(session, topic)

    failures: list[KafkaError] = []
    purged = 0

    def on_failed_delivery(err: KafkaError | None, _msg: Message) -> None:
        nonlocal purged
        if err is None:
            return
        if err.code() in _PURGED:
            purged += 1
        else:
            failures.append(err)

    tuning: dict[str, object] = {
        "acks": settings.acks,
        "linger.ms": settings.linger_ms,
        "batch.size": 1_000_000,  # bytes per partition batch (librdkafka's ceiling default)
        "batch.num.messages": 100_000,  # so batch.size, not a message count, closes 100 B batches
        "queue.buffering.max.messages": 500_000,
        "queue.buffering.max.kbytes": 128 * 1024,
        "compression.type": "none",
        "enable.idempotence": False,
    }
    conf = {
        **_client_config(session),
        **tuning,
        "delivery.report.only.error": True,
        "on_delivery": on_failed_delivery,
    }
    producer = Producer(conf)
    producer.list_topics(topic, timeout=10)  # connect and learn leaders before the clock

    value = os.urandom(size)  # incompressible, though compression is off anyway
    produce, poll = producer.produce, producer.poll
    chunk = 5_000
    sent = 0
    capped = False
    label = f"{session.target} produce-{size_label(size)}"
    session.progress.start(label, records)
    start = time.perf_counter()
    deadline = start + settings.time_cap
    while sent < records:
        n = min(chunk, records - sent)
        for _ in range(n):
            try:
                produce(topic, value)
            except BufferError:  # local queue full: the server is the bottleneck
                _produce_when_room(producer, topic, value)
        sent += n
        poll(0)
        session.progress.update(sent)
        if sent < records and time.perf_counter() >= deadline:
            capped = True
            break
    # Everything handed over must be acknowledged for the clock to stop, within a grace.
    grace_end = time.perf_counter() + max(5.0, settings.time_cap / 2)
    remaining = producer.flush(0.5)
    while remaining and time.perf_counter() < grace_end:
        remaining = producer.flush(0.5)
    elapsed = time.perf_counter() - start
    if remaining:
        capped = True
        producer.purge()
        producer.flush(5)
    delivered = sent - len(failures) - purged
    note = None
    if failures:
        note = f"{len(failures)} failed deliveries, first: {failures[0]}"
        log.warning("%s: %s", label, note)
    if purged:
        log.warning("%s: %d records still unacknowledged after the grace period", label, purged)
    session.progress.finish(f"{delivered:,} records acknowledged")
    if delivered == 0:
        said = f"; client: {session.client_errors[-1]}" if session.client_errors else ""
        raise WorkloadError((note or "no record was acknowledged") + said)
    session.topics[size] = (topic, delivered)
    return _result(
        session, "produce", size, delivered, elapsed, capped, tuning, len(failures), note
    )


def _produce_when_room(producer: Producer, topic: str, value: bytes) -> None:
    """Serves delivery reports until the local queue takes ``value``."""
    while True:
        producer.poll(0.005)
        try:
            producer.produce(topic, value)
            return
        except BufferError:
            continue


def fetch_throughput(session: Session, size: int) -> WorkloadResult:
    """Records/s one consumer reads catching up the topic ``produce_throughput`` filled.

    Uses ``assign()`` from the beginning and never commits (the server has no
    consumer-group APIs yet); ``group.id`` is set only because librdkafka requires one.
    """
    settings = session.settings
    if size not in session.topics:
        raise WorkloadError(f"no {size_label(size)} topic to read: its produce workload failed")
    topic, expected = session.topics[size]
    tuning: dict[str, object] = {
        "group.id": f"logserver-bench-{settings.run_id}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        "auto.offset.reset": "earliest",
        "fetch.max.bytes": 50 * 1024 * 1024,
        "max.partition.fetch.bytes": 8 * 1024 * 1024,
        # librdkafka stops fetching once its local queue holds queued.min.messages (default
        # 100k, i.e. only 10 MB of 100 B records) and then backs off for
        # fetch.queue.backoff.ms (default 1 s): that stall, not the server, would dominate.
        "queued.min.messages": 1_000_000,
        "queued.max.messages.kbytes": 256 * 1024,
        "fetch.queue.backoff.ms": 10,
    }
    consumer = Consumer({**_client_config(session), **tuning})
    try:
        # Read what produce saw acknowledged, from the start; the watermarks are only a
        # cross-check (and warm the connection before the clock starts).
        partitions = [
            TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(settings.partitions)
        ]
        watermark_note = None
        try:
            in_log = 0
            for tp in partitions:
                low, high = consumer.get_watermark_offsets(tp, timeout=10, cached=False)
                in_log += high - low
            if in_log != expected:
                watermark_note = (
                    f"watermarks span {in_log:,} records; {expected:,} were acknowledged"
                )
        except KafkaException as exc:
            watermark_note = f"watermarks unavailable: {exc.args[0]}"
        if watermark_note:
            log.info("%s fetch-%s: %s", session.target, size_label(size), watermark_note)

        consume = consumer.consume
        got = 0
        nbytes = 0
        errors = 0
        first_error: KafkaError | None = None
        capped = False
        label = f"{session.target} fetch-{size_label(size)}"
        session.progress.start(label, expected)
        start = time.perf_counter()
        deadline = start + settings.time_cap
        consumer.assign(partitions)
        while got < expected:
            msgs = consume(num_messages=10_000, timeout=0.2)
            if msgs:
                # C-level loop over the batch; per-message Python only if something failed.
                if any(map(Message.error, msgs)):
                    bad = [m.error() for m in msgs if m.error() is not None]
                    errors += len(bad)
                    first_error = first_error or bad[0]
                    got -= len(bad)
                got += len(msgs)
                nbytes += sum(map(len, msgs))  # value bytes actually received
                session.progress.update(got)
            if time.perf_counter() >= deadline:
                capped = got < expected
                break
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    note = f"{errors} consume errors, first: {first_error}" if errors else None
    if note:
        log.warning("%s: %s", label, note)
    note = "; ".join(n for n in (note, watermark_note) if n) or None
    session.progress.finish(f"{got:,} of {expected:,} records read")
    if got == 0:
        said = f"; client: {session.client_errors[-1]}" if session.client_errors else ""
        raise WorkloadError(f"no record read within {settings.time_cap:g}s{said}")
    if nbytes != got * size:
        log.warning("%s: read %d value bytes, expected %d", label, nbytes, got * size)
    result = _result(session, "fetch", size, got, elapsed, capped, tuning, errors, note, nbytes)
    result.records_requested = expected
    return result


#: The workloads run per record size, in order (fetch reads what produce wrote).
WORKLOADS: list[tuple[str, Callable[[Session, int], WorkloadResult]]] = [
    ("produce", produce_throughput),
    ("fetch", fetch_throughput),
]
