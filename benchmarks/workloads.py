"""Kafka-client workloads: one function each, run against any target's bootstrap.

Each workload is bounded twice, by a record count and by a time cap, so a slow or stuck
server costs at most the cap. Throughput figures count payload bytes (record values)
only, so MB/s means the same thing for every server and compares directly with the raw
baselines. Latency and footprint workloads report their figures in ``metrics``; every
result names one ``primary`` figure, the one compared across targets.
"""

from __future__ import annotations

import logging
import os
import statistics
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from .kafka_raw import catch_up, open_idle, produce_batches, round_trips
from .progress import NULL_PROGRESS, Progress

log = logging.getLogger(__name__)
librdkafka_log = logging.getLogger("benchmarks.librdkafka")

MB = 1_000_000  # MB/s throughout is 10^6 bytes per second
_PURGED = {KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT}
_STAMP = struct.Struct(">q")


class WorkloadError(RuntimeError):
    """A workload could not run at all (as opposed to running slowly)."""


@dataclass
class Settings:
    """Run-wide knobs, the same for every target so their figures compare."""

    records: dict[int, int]  # record size -> records per produce workload
    time_cap: float  # seconds per workload, on top of the record count
    linger_ms: int = 5
    catchup_bytes: int = 1 << 30  # the catch-up log's size
    e2e_rate: int = 10_000  # records/s of the latency workload
    e2e_seconds: float = 10.0  # its measured duration (after a 1 s warm-up)
    many_partitions: int = 1000
    many_partitions_records: int = 1_000_000
    idle_connections: int = 1000
    round_trips: int = 2000
    tail_records: int = 500_000
    run_id: str = field(default_factory=lambda: os.urandom(4).hex())


@dataclass
class Session:
    """One target's share of a run: where it listens and what earlier workloads left."""

    target: str
    bootstrap: str
    settings: Settings
    progress: Progress = NULL_PROGRESS
    #: Resident memory of the server in MB right now, when the run started it.
    rss_mb: Callable[[], float | None] = lambda: None
    #: workload name -> (topic, records acknowledged, partitions) for readers.
    topics: dict[str, tuple[str, int, int]] = field(default_factory=dict)
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
    #: Name of the figure compared across targets (a key of ``metrics`` or a field).
    primary: str = "records_per_s"
    higher_is_better: bool = True
    #: Latency percentiles (ms), memory (MB), counts... whatever the workload measures.
    metrics: dict[str, float] = field(default_factory=dict)

    def value(self, name: str | None = None) -> float | None:
        """A figure by name: ``metrics`` first, then the fields; default the primary."""
        name = name or self.primary
        if name in self.metrics:
            return self.metrics[name]
        got = getattr(self, name, None)
        return float(got) if isinstance(got, int | float) else None

    def to_json(self) -> dict[str, object]:
        """The JSON form written to the result file."""
        return asdict(self)


@dataclass(frozen=True)
class Workload:
    """A named workload: the function and the parameters it runs with."""

    name: str
    kind: str
    run: Callable[[Session, Workload], WorkloadResult]
    size: int = 100
    partitions: int = 1
    acks: str = "1"
    #: Name of the workload whose topic this one reads.
    source: str | None = None
    #: The raw baselines its MB/s is divided by (throughput workloads only).
    baselines: tuple[str, ...] = ()


def size_label(size: int) -> str:
    """100 -> '100B', 1024 -> '1KiB', 1 << 30 -> '1GiB'."""
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift}{unit}"
    return f"{size}B"


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
    w: Workload,
    records: int,
    seconds: float,
    capped: bool,
    config: dict[str, object],
    *,
    requested: int,
    errors: int = 0,
    note: str | None = None,
    nbytes: int | None = None,
) -> WorkloadResult:
    nbytes = records * w.size if nbytes is None else nbytes
    return WorkloadResult(
        workload=w.name,
        kind=w.kind,
        target=session.target,
        record_size=w.size,
        partitions=w.partitions,
        records_requested=requested,
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


def _no_records(session: Session, what: str) -> WorkloadError:
    said = f"; client: {session.client_errors[-1]}" if session.client_errors else ""
    return WorkloadError(what + said)


def create_topic(session: Session, topic: str, partitions: int, timeout: float = 60.0) -> float:
    """Creates ``topic``, waits until every partition has a leader; returns the seconds."""
    admin = AdminClient(_client_config(session))
    start = time.perf_counter()
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
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if (
            meta is not None
            and meta.error is None
            and len(meta.partitions) == partitions
            and all(p.leader >= 0 for p in meta.partitions.values())
        ):
            return time.perf_counter() - start
        if time.monotonic() >= deadline:
            raise WorkloadError(
                f"topic {topic} has no leader for every partition after {timeout:g}s"
            )
        time.sleep(0.05)


def _topic(session: Session, w: Workload) -> str:
    return f"bench-{session.settings.run_id}-{w.name.lower()}"


def _producer_tuning(acks: str, linger_ms: int) -> dict[str, object]:
    return {
        "acks": acks,
        "linger.ms": linger_ms,
        "batch.size": 1_000_000,  # bytes per partition batch (librdkafka's ceiling default)
        "batch.num.messages": 100_000,  # so batch.size, not a message count, closes 100 B batches
        "queue.buffering.max.messages": 500_000,
        "queue.buffering.max.kbytes": 128 * 1024,
        "compression.type": "none",
        "enable.idempotence": False,
        # Keyless records go to a random partition each, so every partition gets load
        # (the default sticks to one partition for 10 ms at a time).
        "sticky.partitioning.linger.ms": 0,
    }


@dataclass
class _Produced:
    delivered: int
    seconds: float
    capped: bool
    failures: int
    note: str | None


def _produce(
    session: Session,
    label: str,
    topic: str,
    size: int,
    records: int,
    tuning: dict[str, object],
    time_cap: float,
) -> _Produced:
    """Sends ``records`` values of ``size`` bytes; clock stops when all are acknowledged.

    Only failed deliveries call back into Python: per-record callbacks would measure
    the client, not the server.
    """
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
    session.progress.start(label, records)
    start = time.perf_counter()
    deadline = start + time_cap
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
    grace_end = time.perf_counter() + max(5.0, time_cap / 2)
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
    return _Produced(delivered, elapsed, capped, len(failures), note)


def _produce_when_room(producer: Producer, topic: str, value: bytes) -> None:
    """Serves delivery reports until the local queue takes ``value``."""
    while True:
        producer.poll(0.005)
        try:
            producer.produce(topic, value)
            return
        except BufferError:
            continue


def produce_throughput(session: Session, w: Workload) -> WorkloadResult:
    """Records/s acknowledged by the server for one producer sending ``w.size``-byte values.

    Tuned for throughput (1 MB batches, ``linger.ms`` 5, a bounded local queue so a slow
    server pushes back instead of the client buffering the whole run).
    """
    settings = session.settings
    records = settings.records[w.size]
    topic = _topic(session, w)
    create_topic(session, topic, w.partitions)
    tuning = _producer_tuning(w.acks, settings.linger_ms)
    got = _produce(
        session, f"{session.target} {w.name}", topic, w.size, records, tuning, settings.time_cap
    )
    if got.delivered == 0:
        raise _no_records(session, got.note or "no record was acknowledged")
    session.topics[w.name] = (topic, got.delivered, w.partitions)
    return _result(
        session, w, got.delivered, got.seconds, got.capped, tuning,
        requested=records, errors=got.failures, note=got.note,
    )  # fmt: skip


def _consumer_tuning(session: Session) -> dict[str, object]:
    return {
        "group.id": f"logserver-bench-{session.settings.run_id}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        "auto.offset.reset": "earliest",
        "fetch.max.bytes": 50 * 1024 * 1024,
        "max.partition.fetch.bytes": 8 * 1024 * 1024,
        # Some servers answer past fetch.max.bytes; refuse only absurd frames.
        "receive.message.max.bytes": 2_147_483_647,
        # librdkafka stops fetching once its local queue holds queued.min.messages (default
        # 100k, i.e. only 10 MB of 100 B records) and then backs off for
        # fetch.queue.backoff.ms (default 1 s): that stall, not the server, would dominate.
        "queued.min.messages": 1_000_000,
        "queued.max.messages.kbytes": 256 * 1024,
        "fetch.queue.backoff.ms": 10,
    }


def _consume_all(
    session: Session,
    w: Workload,
    topic: str,
    expected: int,
    partitions: int,
    label: str,
) -> WorkloadResult:
    """Reads ``expected`` records of ``topic`` from the beginning with one consumer.

    ``assign()`` from the beginning and never commits; ``group.id`` is set only because
    librdkafka requires one.
    """
    settings = session.settings
    tuning = _consumer_tuning(session)
    consumer = Consumer({**_client_config(session), **tuning})
    tps = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
    try:
        consumer.list_topics(topic, timeout=10)  # connect before the clock
        consume = consumer.consume
        got = 0
        nbytes = 0
        errors = 0
        first_error: KafkaError | None = None
        capped = False
        session.progress.start(label, expected)
        start = time.perf_counter()
        deadline = start + settings.time_cap
        consumer.assign(tps)
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
    session.progress.finish(f"{got:,} of {expected:,} records read")
    if got == 0:
        raise _no_records(session, f"no record read within {settings.time_cap:g}s")
    return _result(
        session, w, got, elapsed, capped, tuning,
        requested=expected, errors=errors, note=note, nbytes=nbytes,
    )  # fmt: skip


def fetch_throughput(session: Session, w: Workload) -> WorkloadResult:
    """Records/s one librdkafka consumer reads catching up the topic ``w.source`` filled."""
    if w.source not in session.topics:
        raise WorkloadError(f"nothing to read: {w.source} did not run or failed")
    topic, expected, partitions = session.topics[w.source]
    return _consume_all(session, w, topic, expected, partitions, f"{session.target} {w.name}")


def _catchup_log(session: Session, w: Workload) -> tuple[str, int]:
    """The 1 GiB (``catchup_bytes``) log of 1 KiB records: produce-1KiB's, topped up."""
    settings = session.settings
    records = max(1, settings.catchup_bytes // w.size)
    key = f"catchup-log-{w.size}"
    if key in session.topics:
        topic, have, _ = session.topics[key]
        return topic, have
    source = session.topics.get(w.source or "")
    if source is not None and source[2] == 1:
        topic, have, _ = source
    else:
        topic, have = f"bench-{settings.run_id}-{key}", 0
        create_topic(session, topic, 1)
    if have < records:
        tuning = _producer_tuning("1", settings.linger_ms)
        got = _produce(
            session, f"{session.target} filling the catch-up log", topic, w.size,
            records - have, tuning, max(settings.time_cap, 60.0),
        )  # fmt: skip
        have += got.delivered
    session.topics[key] = (topic, have, 1)
    return topic, have


def produce_raw(session: Session, w: Workload) -> WorkloadResult:
    """MB/s of ready-made 1 MB batches of ``w.size``-byte records, 4 requests in flight.

    The server's produce path without librdkafka's per-record client cost (which on
    these 2 shared cores limits ``produce-*`` long before the server does); compared
    with the append+loopback baseline.
    """
    settings = session.settings
    topic = _topic(session, w)
    create_topic(session, topic, 1)
    total = settings.catchup_bytes
    label = f"{session.target} {w.name}"
    expected = total // w.size
    session.progress.start(label, expected)
    records, nbytes, seconds = produce_batches(
        session.bootstrap, topic, w.size, total, acks=-1 if w.acks == "all" else int(w.acks),
        time_cap=settings.time_cap, on_progress=session.progress.update,
    )  # fmt: skip
    session.progress.finish(f"{records:,} records acknowledged")
    if records == 0:
        raise WorkloadError("no batch acknowledged")
    result = _result(
        session, w, records, seconds, nbytes < total * 0.99,
        {"batch_bytes": 1_000_000, "in_flight": 4, "client": "kafkaproto raw produce"},
        requested=expected, nbytes=nbytes,
    )  # fmt: skip
    result.primary = "mb_per_s"
    return result


def catchup_raw(session: Session, w: Workload) -> WorkloadResult:
    """MB/s reading the whole catch-up log with Fetch requests, records untouched.

    The server's fetch path on its own (for logserver: header bytes, then sendfile from
    the segment), compared with loopback and sendfile bandwidth.
    """
    settings = session.settings
    topic, records = _catchup_log(session, w)
    label = f"{session.target} {w.name}"
    session.progress.start(label, records)
    progress, seconds = catch_up(
        session.bootstrap, topic, 0, 0, records, time_cap=settings.time_cap,
        on_progress=lambda p: session.progress.update(p.records),
    )  # fmt: skip
    session.progress.finish(f"{progress.bytes / MB:,.0f} MB in {progress.fetches} fetches")
    if progress.records == 0:
        raise WorkloadError("no record read")
    result = _result(
        session, w, progress.records, seconds, progress.records < records,
        {"max_bytes": 64 << 20, "client": "kafkaproto raw fetch"},
        requested=records, nbytes=progress.bytes,
    )  # fmt: skip
    result.primary = "mb_per_s"
    result.metrics = {"fetches": progress.fetches, "log_bytes": progress.bytes}
    return result


def catchup_librdkafka(session: Session, w: Workload) -> WorkloadResult:
    """Records/s one librdkafka consumer reads catching up the whole catch-up log."""
    topic, records = _catchup_log(session, w)
    return _consume_all(session, w, topic, records, 1, f"{session.target} {w.name}")


def tail_throughput(session: Session, w: Workload) -> WorkloadResult:
    """Records/s a consumer at the log end reads while a producer writes as fast as it can.

    The clock runs from the first send to the last record read; the lag left when the
    producer finished is in ``metrics``.
    """
    settings = session.settings
    topic = _topic(session, w)
    create_topic(session, topic, w.partitions)
    records = settings.tail_records
    tuning = _consumer_tuning(session)
    consumer = Consumer({**_client_config(session), **tuning})
    ptuning = _producer_tuning(w.acks, settings.linger_ms)
    producer = Producer({**_client_config(session), **ptuning})
    producer.list_topics(topic, timeout=10)
    consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in range(w.partitions)])
    consumer.consume(num_messages=1, timeout=1.0)  # the fetcher is now at the log end
    stop = threading.Event()
    sent_box = [0, 0.0]

    def produce() -> None:
        value = os.urandom(w.size)
        sent = 0
        while sent < records and not stop.is_set():
            try:
                producer.produce(topic, value)
                sent += 1
            except BufferError:
                producer.poll(0.001)
        producer.flush(30)
        sent_box[0], sent_box[1] = sent, time.perf_counter()

    label = f"{session.target} {w.name}"
    session.progress.start(label, records)
    got = nbytes = 0
    start = time.perf_counter()
    deadline = start + settings.time_cap
    thread = threading.Thread(target=produce, name="tail-producer", daemon=True)
    thread.start()
    lag_at_end: int | None = None
    try:
        while got < records and time.perf_counter() < deadline:
            msgs = consumer.consume(num_messages=10_000, timeout=0.1)
            if msgs:
                good = [m for m in msgs if m.error() is None]
                got += len(good)
                nbytes += sum(map(len, good))
                session.progress.update(got)
            if lag_at_end is None and not thread.is_alive():
                lag_at_end = sent_box[0] - got
        elapsed = time.perf_counter() - start
    finally:
        stop.set()
        thread.join(timeout=35)
        consumer.close()
    session.progress.finish(f"{got:,} of {records:,} records read while produced")
    if got == 0:
        raise _no_records(session, "no record read while tailing")
    result = _result(
        session, w, got, elapsed, got < records, {**tuning, **ptuning},
        requested=records, nbytes=nbytes,
    )  # fmt: skip
    result.metrics = {"lag_when_producer_done": float(lag_at_end or 0)}
    return result


def _percentiles(samples: list[float]) -> dict[str, float]:
    """p50/p99/p999/max in ms of latencies in seconds (nearest rank)."""
    ordered = sorted(samples)
    n = len(ordered)

    def at(q: float) -> float:
        return round(ordered[min(n - 1, max(0, int(q * n + 0.5) - 1))] * 1000, 3)

    return {
        "p50_ms": at(0.50),
        "p99_ms": at(0.99),
        "p999_ms": at(0.999),
        "max_ms": round(ordered[-1] * 1000, 3),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 3),
        "samples": float(n),
    }


def e2e_latency(session: Session, w: Workload) -> WorkloadResult:
    """Produce-to-consume latency of every record at a fixed rate (10k records/s).

    The producer stamps ``perf_counter_ns`` into each 100 B value and sends in 1 ms
    ticks (linger.ms 0, acks=1); a consumer thread in the same process takes the
    difference on arrival. The first second is a warm-up and is not counted.
    """
    settings = session.settings
    topic = _topic(session, w)
    create_topic(session, topic, w.partitions)
    rate = settings.e2e_rate
    warmup = 1.0
    total_s = warmup + settings.e2e_seconds
    ptuning = {**_producer_tuning(w.acks, 0), "batch.num.messages": 10_000}
    producer = Producer({**_client_config(session), **ptuning})
    ctuning = {**_consumer_tuning(session), "fetch.wait.max.ms": 100, "fetch.min.bytes": 1}
    consumer = Consumer({**_client_config(session), **ctuning})
    producer.list_topics(topic, timeout=10)
    consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in range(w.partitions)])
    consumer.consume(num_messages=1, timeout=1.0)

    latencies: list[float] = []
    done = threading.Event()
    count_from = [0]

    def consume() -> None:
        unpack = _STAMP.unpack_from
        now = time.perf_counter_ns
        # poll(), not consume(n): consume waits for n messages or the timeout, which
        # would add up to the timeout to every latency.
        poll = consumer.poll
        while not done.is_set():
            m = poll(0.05)
            if m is not None and m.error() is None:
                stamp = unpack(m.value())[0]
                if stamp >= count_from[0]:
                    latencies.append((now() - stamp) / 1e9)

    label = f"{session.target} {w.name}"
    expected = int(rate * settings.e2e_seconds)
    session.progress.start(label, int(rate * total_s))
    thread = threading.Thread(target=consume, name="e2e-consumer", daemon=True)
    thread.start()
    pad = os.urandom(max(0, w.size - _STAMP.size))
    pack = _STAMP.pack
    sent = 0
    start = time.perf_counter()
    count_from[0] = time.perf_counter_ns() + int(warmup * 1e9)
    try:
        while True:
            elapsed = time.perf_counter() - start
            if elapsed >= total_s:
                break
            due = min(int(elapsed * rate), int(total_s * rate))
            while sent < due:
                try:
                    producer.produce(topic, pack(time.perf_counter_ns()) + pad)
                    sent += 1
                except BufferError:
                    producer.poll(0.0005)
            producer.poll(0)
            session.progress.update(sent)
            time.sleep(0.0005)
        producer.flush(10)
        wait_end = time.perf_counter() + 5
        while len(latencies) < expected and time.perf_counter() < wait_end:
            time.sleep(0.01)
    finally:
        done.set()
        thread.join(timeout=5)
        consumer.close()
    session.progress.finish(f"{len(latencies):,} latencies")
    if not latencies:
        raise _no_records(session, "no record came back")
    result = _result(
        session, w, len(latencies), settings.e2e_seconds, len(latencies) < expected * 0.99,
        {**ptuning, "rate": rate}, requested=expected,
    )  # fmt: skip
    result.metrics = _percentiles(latencies)
    result.primary, result.higher_is_better = "p99_ms", False
    return result


def many_partitions_produce(session: Session, w: Workload) -> WorkloadResult:
    """Produce 100 B records spread at random over a fresh 1,000-partition topic.

    ``metrics`` holds how long CreateTopics took until every partition had a leader.
    """
    settings = session.settings
    topic = _topic(session, w)
    created = create_topic(session, topic, w.partitions, timeout=120.0)
    records = settings.many_partitions_records
    tuning = _producer_tuning(w.acks, settings.linger_ms)
    got = _produce(
        session, f"{session.target} {w.name}", topic, w.size, records, tuning, settings.time_cap
    )
    if got.delivered == 0:
        raise _no_records(session, got.note or "no record was acknowledged")
    session.topics[w.name] = (topic, got.delivered, w.partitions)
    result = _result(
        session, w, got.delivered, got.seconds, got.capped, tuning,
        requested=records, errors=got.failures, note=got.note,
    )  # fmt: skip
    result.metrics = {"create_topic_s": round(created, 3)}
    return result


def idle_connections(session: Session, w: Workload) -> WorkloadResult:
    """What 1,000 idle client connections cost: memory, and latency of the busy one.

    Each connection completes an ApiVersions exchange (so the server holds a full
    client connection) and then sends nothing. Request round trips on one more
    connection are timed before and with them open; the server's RSS is read before and
    after (only for a server this run started).
    """
    settings = session.settings
    count = settings.idle_connections
    label = f"{session.target} {w.name}"
    session.progress.start(label, count, unit="connections")
    before = round_trips(session.bootstrap, settings.round_trips)
    rss_before = session.rss_mb()
    start = time.perf_counter()
    conns = open_idle(session.bootstrap, count)
    opened = time.perf_counter() - start
    try:
        session.progress.update(count)
        time.sleep(0.5)
        rss_after = session.rss_mb()
        during = round_trips(session.bootstrap, settings.round_trips)
    finally:
        for conn in conns:
            conn.close()
    session.progress.finish(f"{count:,} connections open in {opened:.2f}s")
    result = _result(
        session, w, count, opened, False, {"round_trips": settings.round_trips},
        requested=count, nbytes=0,
    )  # fmt: skip
    base = _percentiles(before)
    with_idle = _percentiles(during)
    result.metrics = {
        "p50_ms": with_idle["p50_ms"],
        "p99_ms": with_idle["p99_ms"],
        "p50_ms_without": base["p50_ms"],
        "p99_ms_without": base["p99_ms"],
        "connect_s": round(opened, 3),
    }
    if rss_before is not None and rss_after is not None:
        result.metrics["rss_mb"] = rss_after
        result.metrics["kib_per_connection"] = round(
            (rss_after - rss_before) * 1e6 / 1024 / count, 1
        )
    result.primary, result.higher_is_better = "p99_ms", False
    return result


def _matrix() -> list[Workload]:
    out: list[Workload] = []
    for size in (100, 1024):
        for partitions in (1, 8):
            for acks in ("1", "all"):
                name = f"produce-{size_label(size)}-p{partitions}-acks{acks}"
                out.append(Workload(
                    name, "produce", produce_throughput, size, partitions, acks,
                    baselines=("loopback-tcp", "file-append", "append+loopback"),
                ))  # fmt: skip
    return out


#: Every workload, in run order (readers after the producers whose topics they read).
WORKLOADS: list[Workload] = [
    # First, while the servers hold no data: its RSS figures are then per connection,
    # not the data an in-memory peer keeps.
    Workload("idle-connections-1000", "connections", idle_connections, 0),
    *_matrix(),
    Workload("fetch-100B", "fetch", fetch_throughput, 100, source="produce-100B-p1-acks1",
             baselines=("loopback-tcp",)),
    Workload("fetch-1KiB", "fetch", fetch_throughput, 1024, source="produce-1KiB-p8-acks1",
             partitions=8, baselines=("loopback-tcp",)),
    Workload("produce-raw-1KiB", "produce", produce_raw, 1024,
             baselines=("loopback-tcp", "file-append", "append+loopback")),
    Workload("catchup-raw", "catchup", catchup_raw, 1024, source="produce-1KiB-p1-acks1",
             baselines=("loopback-tcp", "sendfile-loopback")),
    Workload("catchup-librdkafka", "catchup", catchup_librdkafka, 1024,
             source="produce-1KiB-p1-acks1", baselines=("loopback-tcp", "sendfile-loopback")),
    Workload("tail-1KiB", "tail", tail_throughput, 1024, baselines=("loopback-tcp",)),
    Workload("e2e-latency-10k", "latency", e2e_latency, 100),
    Workload("partitions-1000-produce", "partitions", many_partitions_produce, 100,
             partitions=1000),
    Workload("partitions-1000-consume", "partitions", fetch_throughput, 100, partitions=1000,
             source="partitions-1000-produce"),
]  # fmt: skip


def select(patterns: list[str]) -> list[Workload]:
    """The workloads whose name contains any of ``patterns`` (all when empty)."""
    if not patterns:
        return list(WORKLOADS)
    return [w for w in WORKLOADS if any(p in w.name for p in patterns)]
