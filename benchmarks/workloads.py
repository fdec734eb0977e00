"""Kafka-client workloads: one function each, one run each call, on a freshly started server.

Every run has a warm-up (``Settings.warmup_s``, not counted) and then a measured window
of ``Settings.measure_s`` (at least 5 s by default) that it opens and closes on
``Session.window``, so rates, latencies and the server's CPU share cover steady state
only. What a run needs beforehand (a topic, a log to read) is set up before the warm-up
and never timed. Readers read their log over and over until the window closes.
Throughput figures count payload bytes (record values) only, so MB/s means the same
thing for every server and compares directly with the raw baselines. Latency and
footprint workloads report their figures in ``metrics``; every result names one
``primary`` figure, the one compared across targets.
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
from .window import Window

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

    warmup_s: float = 1.0  # seconds of load before the measured window, not counted
    measure_s: float = 5.0  # seconds of the measured window
    #: Records written before a read workload, by record size (the log it reads).
    fill_records: dict[int, int] = field(
        default_factory=lambda: {100: 3_000_000, 1024: 1 << 20})
    fill_cap_s: float = 120.0  # seconds allowed to write that log
    linger_ms: int = 5
    catchup_bytes: int = 1 << 30  # the catch-up log's size
    e2e_rate: int = 10_000  # records/s of the latency workload
    e2e_seconds: float = 10.0  # its measured duration (after the warm-up)
    e2e_fetch_wait_max_ms: int = 100  # the latency consumer's fetch.wait.max.ms
    many_partitions: int = 1000
    many_partitions_records: int = 1_000_000  # records the 1,000-partition reader reads
    idle_connections: int = 1000
    run_id: str = field(default_factory=lambda: os.urandom(4).hex())


@dataclass
class Session:
    """One run of one workload on one target: where it listens and its measured window."""

    target: str
    bootstrap: str
    settings: Settings
    progress: Progress = NULL_PROGRESS
    #: Resident memory of the server in MB right now, when the run started it.
    rss_mb: Callable[[], float | None] = lambda: None
    #: Opened and closed by the workload around its measured part.
    window: Window = field(default_factory=Window)
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
    capped: bool  # a run that could not finish as planned (see ``note``)
    errors: int = 0
    note: str | None = None
    config: dict[str, object] = field(default_factory=dict)
    #: Name of the figure compared across targets (a key of ``metrics`` or a field).
    primary: str = "records_per_s"
    higher_is_better: bool = True
    #: Latency percentiles (ms), memory (MB), counts... whatever the workload measures.
    metrics: dict[str, float] = field(default_factory=dict)
    #: Which repetition this is (1-based) and its place in that round's server order.
    run: int = 0
    position: int = 0

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
    #: For readers: the records written before the run (``Settings.fill_records``
    #: by size unless the workload says otherwise), in ``partitions`` partitions.
    reads: bool = False
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
    # The stubs type config values as scalars; librdkafka's logger and error_cb are objects.
    admin = AdminClient(_client_config(session))  # type: ignore[arg-type]
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


class _Sender:
    """One librdkafka producer sending ``size``-byte values; only failures call back."""

    def __init__(self, session: Session, topic: str, size: int, tuning: dict[str, object]) -> None:
        self.failures: list[KafkaError] = []
        self.purged = 0

        def on_failed_delivery(err: KafkaError | None, _msg: Message) -> None:
            if err is None:
                return
            if err.code() in _PURGED:
                self.purged += 1
            else:
                self.failures.append(err)

        conf = {
            **_client_config(session),
            **tuning,
            "delivery.report.only.error": True,
            "on_delivery": on_failed_delivery,
        }
        self.producer = Producer(conf)
        self.producer.list_topics(topic, timeout=10)  # connect, learn leaders: set-up
        self.topic = topic
        self.value = os.urandom(size)  # incompressible, though compression is off anyway
        self.sent = 0

    def send(self, n: int) -> None:
        """Hands ``n`` records to the client, waiting for room when its queue is full."""
        produce, topic, value = self.producer.produce, self.topic, self.value
        for _ in range(n):
            try:
                produce(topic, value)
            except BufferError:  # local queue full: the server is the bottleneck
                _produce_when_room(self.producer, topic, value)
        self.sent += n
        self.producer.poll(0)

    def drain(self, grace: float) -> int:
        """Waits until every record handed over is acknowledged; returns those left over."""
        grace_end = time.perf_counter() + grace
        remaining = self.producer.flush(0.5)
        while remaining and time.perf_counter() < grace_end:
            remaining = self.producer.flush(0.5)
        return int(remaining)

    def give_up(self) -> None:
        self.producer.purge()
        self.producer.flush(5)


def _produce(
    session: Session,
    label: str,
    topic: str,
    size: int,
    records: int,
    tuning: dict[str, object],
    time_cap: float,
) -> _Produced:
    """Set-up: sends ``records`` values of ``size`` bytes and waits for their acks."""
    sender = _Sender(session, topic, size, tuning)
    capped = False
    session.progress.start(label, records)
    start = time.perf_counter()
    deadline = start + time_cap
    while sender.sent < records:
        sender.send(min(5_000, records - sender.sent))
        session.progress.update(sender.sent)
        if sender.sent < records and time.perf_counter() >= deadline:
            capped = True
            break
    if sender.drain(max(5.0, time_cap / 4)):
        capped = True
        sender.give_up()
    elapsed = time.perf_counter() - start
    return _finish_produce(session, label, sender, sender.sent, elapsed, capped)


def _finish_produce(session: Session, label: str, sender: _Sender, counted: int,
                    elapsed: float, capped: bool) -> _Produced:
    failures = len(sender.failures)
    delivered = max(0, counted - failures - sender.purged)
    note = None
    if failures:
        note = f"{failures} failed deliveries, first: {sender.failures[0]}"
        log.warning("%s: %s", label, note)
    if sender.purged:
        log.warning("%s: %d records still unacknowledged after the grace period", label,
                    sender.purged)
    session.progress.finish(f"{delivered:,} records acknowledged")
    return _Produced(delivered, elapsed, capped, failures, note)


def _produce_for(session: Session, label: str, topic: str, size: int,
                 tuning: dict[str, object]) -> _Produced:
    """Produces for the warm-up, then counts what is produced in the measured window.

    The window closes once every record handed over in it is acknowledged. The client's
    queue is bounded, so handing over records keeps pace with acknowledgements: the
    records already queued when the window opens are not counted, the ones queued when
    it stops sending are, and both are a full queue at steady state.
    """
    settings = session.settings
    sender = _Sender(session, topic, size, tuning)
    session.progress.start(label, 0)
    warm_end = time.perf_counter() + settings.warmup_s
    while time.perf_counter() < warm_end:
        sender.send(5_000)
    session.window.begin()
    start, first = time.perf_counter(), sender.sent
    stop = start + settings.measure_s
    while time.perf_counter() < stop:
        sender.send(5_000)
        session.progress.update(sender.sent - first)
    left = sender.drain(max(10.0, settings.measure_s))
    session.window.end()
    elapsed = time.perf_counter() - start
    if left:
        sender.give_up()
    return _finish_produce(session, label, sender, sender.sent - first, elapsed, bool(left))


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
    topic = _topic(session, w)
    created = create_topic(session, topic, w.partitions, timeout=120.0)
    tuning = _producer_tuning(w.acks, session.settings.linger_ms)
    got = _produce_for(session, f"{session.target} {w.name}", topic, w.size, tuning)
    if got.delivered == 0:
        raise _no_records(session, got.note or "no record was acknowledged")
    result = _result(
        session, w, got.delivered, got.seconds, got.capped, tuning,
        requested=got.delivered, errors=got.failures, note=got.note,
    )  # fmt: skip
    if w.partitions > 1:
        result.metrics["create_topic_s"] = round(created, 3)
    return result


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


def _fill(session: Session, w: Workload, records: int) -> tuple[str, int]:
    """Set-up of a reader: a fresh topic holding ``records`` values; (topic, records)."""
    settings = session.settings
    topic = _topic(session, w)
    create_topic(session, topic, w.partitions, timeout=120.0)
    tuning = _producer_tuning("1", settings.linger_ms)
    got = _produce(session, f"{session.target} {w.name}: writing the log to read", topic,
                   w.size, records, tuning, settings.fill_cap_s)
    if got.delivered == 0:
        raise _no_records(session, got.note or "could not write the log to read")
    return topic, got.delivered


def _read_for(session: Session, w: Workload, topic: str, expected: int, label: str
              ) -> WorkloadResult:
    """Reads ``topic`` from the beginning, again and again, with one consumer.

    ``assign()`` from offset 0 and ``seek()`` back to 0 each time all ``expected``
    records came back; never commits (``group.id`` is set only because librdkafka
    requires one). ``fetch.wait.max.ms`` is 10: at the end of a pass the consumer's
    fetch at the log end would otherwise hold the seek back for the default 500 ms (a
    fetch that finds data returns at once either way). The warm-up includes the first
    fetches; the window counts records returned while it is open.
    """
    settings = session.settings
    tuning = {**_consumer_tuning(session), "fetch.wait.max.ms": 10}
    consumer = Consumer({**_client_config(session), **tuning})
    tps = [TopicPartition(topic, p, 0) for p in range(w.partitions)]
    try:
        consumer.list_topics(topic, timeout=10)  # connect: set-up
        consume = consumer.consume
        got = nbytes = errors = passes = in_pass = 0
        first_error: KafkaError | None = None
        session.progress.start(label, 0)
        consumer.assign(tps)
        warm_end = time.perf_counter() + settings.warmup_s
        start: float | None = None
        while True:
            msgs = consume(num_messages=10_000, timeout=0.2)
            now = time.perf_counter()
            if msgs:
                # C-level loop over the batch; per-message Python only if something failed.
                n, size = len(msgs), sum(map(len, msgs))
                if any(map(Message.error, msgs)):
                    bad = [m.error() for m in msgs if m.error() is not None]
                    errors += len(bad)
                    first_error = first_error or bad[0]
                    n -= len(bad)
                in_pass += n
                if start is not None:
                    got += n
                    nbytes += size
                    session.progress.update(got)
                if in_pass >= expected:
                    _rewind(consumer, tps)
                    in_pass, passes = 0, passes + 1
            if start is None:
                if now >= warm_end:
                    session.window.begin()
                    start = now
            elif now >= start + settings.measure_s:
                session.window.end()
                break
        elapsed = now - start
    finally:
        consumer.close()
    note = f"{errors} consume errors, first: {first_error}" if errors else None
    if note:
        log.warning("%s: %s", label, note)
    session.progress.finish(f"{got:,} records read ({passes} whole passes)")
    if got == 0:
        raise _no_records(session, f"no record read within {settings.measure_s:g}s")
    result = _result(
        session, w, got, elapsed, False, tuning,
        requested=expected, errors=errors, note=note, nbytes=nbytes,
    )  # fmt: skip
    result.metrics["log_records"] = float(expected)
    result.metrics["passes"] = float(passes)
    return result


def _rewind(consumer: Consumer, tps: list[TopicPartition]) -> None:
    """Back to offset 0 of every partition (a fresh topic starts there)."""
    try:
        for tp in tps:
            consumer.seek(tp)
    except KafkaException:  # a partition not fetching yet: assign anew instead
        consumer.assign(tps)


def fetch_throughput(session: Session, w: Workload) -> WorkloadResult:
    """Records/s one librdkafka consumer reads from a log written before the run."""
    records = (session.settings.many_partitions_records if w.partitions >= 1000
               else session.settings.fill_records[w.size])
    topic, have = _fill(session, w, records)
    return _read_for(session, w, topic, have, f"{session.target} {w.name}")


def _catchup_log(session: Session, w: Workload) -> tuple[str, int]:
    """The 1 GiB (``catchup_bytes``) log of 1 KiB records, written before the run."""
    return _fill(session, w, max(1, session.settings.catchup_bytes // w.size))


def produce_raw(session: Session, w: Workload) -> WorkloadResult:
    """MB/s of ready-made 1 MB batches of ``w.size``-byte records, 4 requests in flight.

    The server's produce path without librdkafka's per-record client cost (which on
    these 2 shared cores limits ``produce-*`` long before the server does); compared
    with the append+loopback baseline. One connection warms up, a second one is timed.
    """
    settings = session.settings
    topic = _topic(session, w)
    create_topic(session, topic, 1)
    label = f"{session.target} {w.name}"
    acks = -1 if w.acks == "all" else int(w.acks)
    unbounded = 1 << 50  # the time cap, not a byte count, ends each phase
    session.progress.start(label, 0)
    produce_batches(session.bootstrap, topic, w.size, unbounded, acks=acks,
                    time_cap=settings.warmup_s)
    session.window.begin()
    start = time.perf_counter()
    records, nbytes, _ = produce_batches(
        session.bootstrap, topic, w.size, unbounded, acks=acks,
        time_cap=settings.measure_s, on_progress=session.progress.update,
    )  # fmt: skip
    session.window.end()
    seconds = time.perf_counter() - start
    session.progress.finish(f"{records:,} records acknowledged")
    if records == 0:
        raise WorkloadError("no batch acknowledged")
    result = _result(
        session, w, records, seconds, False,
        {"batch_bytes": 1_000_000, "in_flight": 4, "client": "kafkaproto raw produce"},
        requested=records, nbytes=nbytes,
    )  # fmt: skip
    result.primary = "mb_per_s"
    return result


def catchup_raw(session: Session, w: Workload) -> WorkloadResult:
    """MB/s reading the whole catch-up log with Fetch requests, records untouched.

    The server's fetch path on its own (for logserver: header bytes, then sendfile from
    the segment), compared with loopback and sendfile bandwidth. The log is read from
    its start again and again (one connection per pass) until the window closes.
    """
    settings = session.settings
    topic, records = _catchup_log(session, w)
    label = f"{session.target} {w.name}"
    session.progress.start(label, 0)
    catch_up(session.bootstrap, topic, 0, 0, records, time_cap=settings.warmup_s)
    session.window.begin()
    start = time.perf_counter()
    stop = start + settings.measure_s
    nbytes = got = fetches = passes = 0
    while (left := stop - time.perf_counter()) > 0:
        progress, _ = catch_up(session.bootstrap, topic, 0, 0, records, time_cap=left)
        nbytes += progress.bytes
        got += progress.records
        fetches += progress.fetches
        passes += progress.records >= records
        session.progress.update(got)
        if progress.records == 0:
            break
    session.window.end()
    seconds = time.perf_counter() - start
    session.progress.finish(f"{nbytes / MB:,.0f} MB in {fetches} fetches, {passes} passes")
    if got == 0:
        raise WorkloadError("no record read")
    result = _result(
        session, w, got, seconds, False,
        {"max_bytes": 64 << 20, "client": "kafkaproto raw fetch"},
        requested=records, nbytes=nbytes,
    )  # fmt: skip
    result.primary = "mb_per_s"
    result.metrics = {"fetches": float(fetches), "passes": float(passes),
                      "log_records": float(records)}
    return result


def catchup_librdkafka(session: Session, w: Workload) -> WorkloadResult:
    """Records/s one librdkafka consumer reads catching up the whole catch-up log."""
    topic, records = _catchup_log(session, w)
    return _read_for(session, w, topic, records, f"{session.target} {w.name}")


def tail_throughput(session: Session, w: Workload) -> WorkloadResult:
    """Records/s a consumer at the log end reads while a producer writes as fast as it can.

    Records read during the window count; ``metrics`` has how many records the producer
    had handed over but the consumer had not read when the window closed.
    """
    settings = session.settings
    topic = _topic(session, w)
    create_topic(session, topic, w.partitions)
    tuning = _consumer_tuning(session)
    consumer = Consumer({**_client_config(session), **tuning})
    ptuning = _producer_tuning(w.acks, settings.linger_ms)
    producer = Producer({**_client_config(session), **ptuning})
    producer.list_topics(topic, timeout=10)
    consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in range(w.partitions)])
    consumer.consume(num_messages=1, timeout=1.0)  # the fetcher is now at the log end
    stop = threading.Event()
    sent_box = [0]

    def produce() -> None:
        value = os.urandom(w.size)
        while not stop.is_set():
            try:
                producer.produce(topic, value)
                sent_box[0] += 1
            except BufferError:
                producer.poll(0.001)
        producer.flush(30)

    label = f"{session.target} {w.name}"
    session.progress.start(label, 0)
    got = nbytes = read_total = 0
    thread = threading.Thread(target=produce, name="tail-producer", daemon=True)
    thread.start()
    warm_end = time.perf_counter() + settings.warmup_s
    start: float | None = None
    lag_at_end = 0
    try:
        while True:
            msgs = consumer.consume(num_messages=10_000, timeout=0.1)
            now = time.perf_counter()
            good = [m for m in msgs if m.error() is None] if msgs else []
            read_total += len(good)
            if start is not None:
                got += len(good)
                nbytes += sum(map(len, good))
                session.progress.update(got)
            if start is None:
                if now >= warm_end:
                    session.window.begin()
                    start = now
            elif now >= start + settings.measure_s:
                session.window.end()
                lag_at_end = sent_box[0] - read_total
                break
            if not thread.is_alive():
                raise WorkloadError("the tail producer stopped")
        elapsed = now - start
    finally:
        stop.set()
        thread.join(timeout=35)
        consumer.close()
    session.progress.finish(f"{got:,} records read while produced")
    if got == 0:
        raise _no_records(session, "no record read while tailing")
    result = _result(
        session, w, got, elapsed, False, {**tuning, **ptuning},
        requested=got, nbytes=nbytes,
    )  # fmt: skip
    result.metrics = {"lag_at_window_end": float(lag_at_end)}
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
    difference on arrival. The warm-up is not counted. The consumer's
    ``fetch.wait.max.ms`` is reported with the figure: a server that does not answer a
    waiting fetch when records arrive shows up to that much latency.
    """
    settings = session.settings
    topic = _topic(session, w)
    create_topic(session, topic, w.partitions)
    rate = settings.e2e_rate
    warmup = settings.warmup_s
    total_s = warmup + settings.e2e_seconds
    ptuning = {**_producer_tuning(w.acks, 0), "batch.num.messages": 10_000}
    producer = Producer({**_client_config(session), **ptuning})
    wait_ms = settings.e2e_fetch_wait_max_ms
    ctuning = {**_consumer_tuning(session), "fetch.wait.max.ms": wait_ms, "fetch.min.bytes": 1}
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
                stamp = unpack(m.value() or b"")[0]
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
    opened = False
    try:
        while True:
            elapsed = time.perf_counter() - start
            if elapsed >= total_s:
                break
            if not opened and elapsed >= warmup:
                session.window.begin()
                opened = True
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
        if opened:
            session.window.end()
    finally:
        done.set()
        thread.join(timeout=5)
        consumer.close()
    session.progress.finish(f"{len(latencies):,} latencies")
    if not latencies:
        raise _no_records(session, "no record came back")
    missing = max(0, expected - len(latencies))
    result = _result(
        session, w, len(latencies), settings.e2e_seconds, missing > expected * 0.01,
        {**ptuning, "rate": rate, "fetch.wait.max.ms": wait_ms}, requested=expected,
        note=f"{missing:,} of {expected:,} records never came back" if missing else None,
    )  # fmt: skip
    result.metrics = _percentiles(latencies)
    result.metrics["fetch_wait_max_ms"] = float(wait_ms)
    result.primary, result.higher_is_better = "p99_ms", False
    return result


#: ApiVersions round trips per connection in the idle-connections workload.
_ROUND_TRIP_CHUNK = 500


def _round_trips_for(bootstrap: str, seconds: float) -> list[float]:
    """Sequential ApiVersions round-trip times for ``seconds``, in chunks of connections."""
    out: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        out += round_trips(bootstrap, _ROUND_TRIP_CHUNK)
    return out


def idle_connections(session: Session, w: Workload) -> WorkloadResult:
    """What 1,000 idle client connections cost: memory, and latency of the busy one.

    Each connection completes an ApiVersions exchange (so the server holds a full
    client connection) and then sends nothing. Request round trips on one more
    connection are timed for the measured length before and with them open (the window
    is the part with them open); the server's RSS is read before and after (only for a
    server this run started).
    """
    settings = session.settings
    count = settings.idle_connections
    label = f"{session.target} {w.name}"
    session.progress.start(label, count, unit="connections")
    _round_trips_for(session.bootstrap, settings.warmup_s)
    before = _round_trips_for(session.bootstrap, settings.measure_s)
    rss_before = session.rss_mb()
    start = time.perf_counter()
    conns = open_idle(session.bootstrap, count)
    opened = time.perf_counter() - start
    try:
        session.progress.update(count)
        time.sleep(0.5)
        rss_after = session.rss_mb()
        session.window.begin()
        during = _round_trips_for(session.bootstrap, settings.measure_s)
        session.window.end()
    finally:
        for conn in conns:
            conn.close()
    session.progress.finish(f"{count:,} connections open in {opened:.2f}s")
    result = _result(
        session, w, count, opened, False, {"round_trips_s": settings.measure_s},
        requested=count, nbytes=0,
    )  # fmt: skip
    base = _percentiles(before)
    with_idle = _percentiles(during)
    result.metrics = {
        "p50_ms": with_idle["p50_ms"],
        "p99_ms": with_idle["p99_ms"],
        "p50_ms_without": base["p50_ms"],
        "p99_ms_without": base["p99_ms"],
        "round_trips": with_idle["samples"],
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


#: Every workload, in run order. Each run starts its own server, so none depends on another.
WORKLOADS: list[Workload] = [
    Workload("idle-connections-1000", "connections", idle_connections, 0),
    *_matrix(),
    Workload("fetch-100B", "fetch", fetch_throughput, 100, reads=True,
             baselines=("loopback-tcp",)),
    Workload("fetch-1KiB", "fetch", fetch_throughput, 1024, partitions=8, reads=True,
             baselines=("loopback-tcp",)),
    Workload("produce-raw-1KiB", "produce", produce_raw, 1024,
             baselines=("loopback-tcp", "file-append", "append+loopback")),
    Workload("catchup-raw", "catchup", catchup_raw, 1024, reads=True,
             baselines=("loopback-tcp", "sendfile-loopback")),
    Workload("catchup-librdkafka", "catchup", catchup_librdkafka, 1024, reads=True,
             baselines=("loopback-tcp", "sendfile-loopback")),
    Workload("tail-1KiB", "tail", tail_throughput, 1024, baselines=("loopback-tcp",)),
    Workload("e2e-latency-10k", "latency", e2e_latency, 100),
    Workload("partitions-1000-produce", "partitions", produce_throughput, 100,
             partitions=1000),
    Workload("partitions-1000-consume", "partitions", fetch_throughput, 100, partitions=1000,
             reads=True),
]  # fmt: skip

#: ``--quick``: fewer workloads, runs just as long.
QUICK = ("produce-1KiB-p1-acks1", "produce-raw-1KiB", "catchup-raw", "e2e-latency-10k")


def select(patterns: list[str]) -> list[Workload]:
    """The workloads whose name contains any of ``patterns`` (all when empty)."""
    if not patterns:
        return list(WORKLOADS)
    return [w for w in WORKLOADS if any(p in w.name for p in patterns)]
