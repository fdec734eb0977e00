"""Crash harness: produce with an idempotent acks=all producer, kill -9 the server at a
random moment, restart it, check the log on disk and through a consumer. Repeat.

Each cycle:

1. A fresh confluent-kafka producer (``enable.idempotence``, ``acks=all``) sends small
   bursts of unique values from a thread; once the first is acknowledged, the server is
   killed with SIGKILL after a random 20-600 ms.
2. kill -9 mode: restart, and let the same producer deliver what was in flight (its
   retries must be deduplicated by the restarted server). Power-loss mode: purge the
   producer and take away what a machine crash may take (``powerloss.Disk``: every file
   cut at a random point after what the fsyncs observed by an LD_PRELOAD shim covered,
   creations and renames whose directory was not fsynced undone), then restart. The
   server's own view of what it fsynced plays no part in it.
3. Check: every segment file parses, CRCs are valid, offsets are dense; no value is
   stored twice; every acknowledged value is at the offset it was acknowledged with
   (or, after a simulated power loss, counted as lost and checked against the mode's
   stated guarantee); a consumer reads the same records back.

Whether an acknowledged record may be lost to a power loss is judged by bytes, not by the
clock: it may be lost only if its batch was not inside what an fsync that completed before
the kill covered (the shim's journal), and under fsync-every-append an fsync must have
covered it before it was acknowledged. The server's timer may be late on a loaded
machine; what it made durable is what the checks read.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from helpers.faults.logfiles import (
    LogCheckError,
    PartitionFiles,
    batch_extents,
    extent_of,
    scan_partition,
)
from helpers.faults.powerloss import Disk
from helpers.serverproc import ServerProcess

TOPIC = "crash"
FSYNC_INTERVAL_MS = 100

#: Durability modes under test: the server settings of each.
MODES: dict[str, dict[str, object]] = {
    "fsync-every-append": {"log.flush.interval.messages": 1},
    "fsync-interval": {"log.flush.interval.ms": FSYNC_INTERVAL_MS},
    "ack-after-write": {},
}


def loss_allowed(mode: str, power_loss: bool, fsynced: bool) -> bool:
    """The manual's guarantee of each mode (docs/configuration.md, Durability), as a
    predicate on one lost acknowledged record; ``fsynced``: its batch lay inside the bytes
    of its file that an fsync completed before the kill covered (the shim's journal).

    A process crash (kill -9) never loses an acknowledged record in any mode: the page
    cache survives it. A power loss loses nothing under fsync-every-append (each record
    is fsynced before it is acknowledged, checked apart); under fsync-interval and
    ack-after-write what no completed fsync covered: the interval bounds how much that
    is in time, which a loaded machine stretches (the timing is benchmarks/crash_loop.py's,
    not a test's); what was fsynced must survive in every mode.
    """
    if not power_loss or mode == "fsync-every-append":
        return False
    return not fsynced


@dataclass
class CrashReport:
    mode: str
    power_loss: bool
    cycles: int = 0
    acked: int = 0  # distinct records acknowledged to the producer
    in_doubt_stored: int = 0  # records stored but never acknowledged (in flight at the kill)
    records_checked: int = 0  # sum over cycles of records re-verified on disk (CRC + offsets)
    acked_checked: int = 0  # sum over cycles of acknowledged records found where acked
    consumer_read: int = 0
    lost: int = 0
    lost_max_age_ms: float = 0.0  # oldest lost record: ms between its ack and the kill
    acked_fsynced: int = 0  # power loss: acknowledged records an observed fsync covered
    file_fsyncs: int = 0  # power loss: fsyncs of regular files the shim journaled
    bytes_cut: int = 0
    entries_lost: int = 0  # files and directories whose creation was not made durable
    longest_fsync_round_ms: float = 0.0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)

    def summary(self) -> str:
        kind = "kill -9 + simulated power loss" if self.power_loss else "kill -9"
        return (f"crash harness [{self.mode}, {kind}]: {self.cycles} cycles in {self.seconds:.0f}s, "
                f"{self.acked} records acknowledged, {self.in_doubt_stored} in-flight records stored, "
                f"{self.records_checked} record checks on disk, {self.acked_checked} acked-record "
                f"checks, {self.consumer_read} read back by a consumer; lost {self.lost} acknowledged "
                f"records (oldest acked {self.lost_max_age_ms:.0f} ms before the kill), "
                f"{self.acked_fsynced} acknowledged records covered by an observed fsync "
                f"({self.file_fsyncs} file fsyncs), "
                f"{self.bytes_cut} unsynced bytes cut, {self.entries_lost} unsynced directory "
                f"entries lost, longest fsync round {self.longest_fsync_round_ms:.1f} ms; "
                f"failures: {len(self.failures)}")


def run(workdir: Path, mode: str, cycles: int, *, power_loss: bool = False, seed: int | None = None,
        time_budget: float | None = None, partitions: int = 2,
        out: Callable[[str], None] = print,
        extra_settings: dict[str, object] | None = None) -> CrashReport:
    """Run up to ``cycles`` crash cycles (fewer if ``time_budget`` seconds run out);
    ``extra_settings`` are server settings on top of the mode's."""
    seed = random.randrange(2**32) if seed is None else seed
    rng = random.Random(seed)
    out(f"crash harness: mode={mode} power_loss={power_loss} cycles={cycles} seed={seed}")
    report = CrashReport(mode, power_loss)
    started = time.monotonic()
    data_dir = workdir / "data"
    disk = Disk(data_dir, workdir) if power_loss else None
    settings = dict(MODES[mode], **{"log.segment.bytes": 256 * 1024, "num.partitions": partitions})
    settings.update(extra_settings or {})
    server = ServerProcess(data_dir, settings=settings, log_path=workdir / "server.log",
                           env=disk.environment() if disk is not None else None)
    server.start()
    try:
        _create_topic(server.bootstrap, partitions)
        if disk is not None:  # the known-durable starting point
            server.kill9()
            disk.checkpoint()
            server.start()
        files = {p: PartitionFiles(data_dir / f"{TOPIC}-{p}") for p in range(partitions)}
        where: dict[bytes, tuple[int, int]] = {}  # value -> (partition, offset) on disk
        acked_all: set[bytes] = set()
        consumer_from = dict.fromkeys(range(partitions), 0)
        for cycle in range(cycles):
            if time_budget is not None and time.monotonic() - started > time_budget:
                out(f"time budget of {time_budget:.0f}s reached after {cycle} cycles")
                break
            try:
                _cycle(server, cycle, rng, report, files, where, acked_all, consumer_from, disk)
            except (LogCheckError, AssertionError) as exc:
                report.failures.append(f"cycle {cycle}: {exc}")
                out(f"FAILED cycle {cycle}: {exc}")
                break
            report.cycles += 1
            if cycle % 10 == 9:
                out(f"  {report.cycles} cycles, {report.acked} acked, lost {report.lost}")
        if not report.failures:
            _consumer_check(server.bootstrap, files, dict.fromkeys(range(partitions), 0), report)
    finally:
        server.stop()
    report.seconds = time.monotonic() - started
    out(report.summary())
    return report


def _create_topic(bootstrap: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(timeout=15)


def _cycle(server: ServerProcess, cycle: int, rng: random.Random, report: CrashReport,
           files: dict[int, PartitionFiles], where: dict[bytes, tuple[int, int]],
           acked_all: set[bytes], consumer_from: dict[int, int], disk: Disk | None) -> None:
    from confluent_kafka import Producer

    power_loss = disk is not None
    fsynced: set[bytes] = set()  # power loss: acked values an fsync covered before the kill
    acked: dict[bytes, tuple[int, int]] = {}
    ack_time: dict[bytes, float] = {}
    errors: list[str] = []
    producer = Producer({
        "bootstrap.servers": server.bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": rng.choice([0, 1, 5]),
        "message.timeout.ms": 60000,
        "retry.backoff.ms": 20,
        "retry.backoff.max.ms": 100,
        "reconnect.backoff.ms": 20,
        "reconnect.backoff.max.ms": 200,
        "log_level": 2,
    })

    def delivered(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            acked[msg.value()] = (msg.partition(), msg.offset())
            ack_time[msg.value()] = time.monotonic()
        elif not power_loss:
            errors.append(f"{msg.value()!r}: {err}")

    stop = threading.Event()
    thread_rng = random.Random(rng.random())

    def produce() -> None:
        i = 0
        while not stop.is_set():
            for _ in range(thread_rng.randint(1, 40)):
                value = f"c{cycle:05d}-{i:07d}".encode()
                try:
                    producer.produce(TOPIC, value=value, key=str(i % 13).encode(),
                                     on_delivery=delivered)
                except BufferError:
                    break
                i += 1
            producer.poll(0)
            time.sleep(thread_rng.uniform(0, 0.004))
        producer.poll(0)

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    # The crash comes at a random moment once acknowledgements flow (the producer's
    # start-up, about 0.5 s, would otherwise eat most of the window).
    deadline = time.monotonic() + 15
    while not acked and time.monotonic() < deadline:
        time.sleep(0.005)
    assert acked, "no record acknowledged within 15 s of the producer's start"
    time.sleep(rng.uniform(0.02, 0.6))
    kill_time = time.monotonic()  # before the signal: the server cannot outlive it
    server.kill9()
    stop.set()
    thread.join(timeout=10)
    if disk is not None:
        producer.purge(in_queue=True, in_flight=True, blocking=False)
        producer.poll(0)
        extents = {p: batch_extents(state.directory) for p, state in files.items()}
        loss = disk.power_loss(rng)
        report.bytes_cut += loss.bytes_cut
        report.entries_lost += len(loss.entries_lost)
        report.file_fsyncs += loss.file_fsyncs
        report.longest_fsync_round_ms = max(report.longest_fsync_round_ms,
                                            loss.longest_fsync_round_ms)
        disk.checkpoint()
        for value, (p, offset) in acked.items():
            extent = extent_of(extents[p], offset)
            # acknowledged after write(): after a kill -9 the page cache still holds it
            assert extent is not None, (
                f"{value!r} acknowledged at {(p, offset)} was not in the files after the kill")
            if loss.durable.get(extent.path, 0) >= extent.end:
                fsynced.add(value)
            elif report.mode == "fsync-every-append":
                raise AssertionError(
                    f"{value!r} acknowledged at {(p, offset)} before an fsync covered it (the "
                    f"shim saw {loss.durable.get(extent.path, 0)} bytes of "
                    f"{Path(extent.path).name} fsynced, the batch ends at {extent.end})")
        report.acked_fsynced += len(fsynced)
    server.start()
    if disk is None:
        remaining = producer.flush(60)
        assert remaining == 0, f"{remaining} records never delivered after the restart"
        assert not errors, f"delivery failures: {errors[:3]}"
    else:
        producer.flush(0)


    # -- on disk: CRC, dense offsets, each value at most once ---------------------------------
    for p, state in files.items():
        new_offsets, removed = scan_partition(state)
        for offset, value in removed.items():  # only a simulated power loss may cut records
            assert power_loss, f"recovery removed offset {offset} of partition {p}"
            if value is not None and where.get(value) == (p, offset):
                del where[value]
        for offset in new_offsets:
            value = state.values[offset]
            assert value is not None
            loc = where.get(value)
            if loc is None:
                where[value] = (p, offset)
            elif loc != (p, offset):
                raise AssertionError(f"{value!r} stored twice: at {loc} and {(p, offset)}")
        report.records_checked += len(state.values)

    # -- every acknowledged record where it was acknowledged -----------------------------------
    for value in acked_all:
        if value not in where:
            raise AssertionError(f"{value!r}, acknowledged in an earlier cycle, is gone")
    report.acked_checked += len(acked_all)
    for value, loc in acked.items():
        found = where.get(value)
        if found == loc:
            acked_all.add(value)
            report.acked_checked += 1
            continue
        age_ms = (kill_time - ack_time[value]) * 1000  # reported, not judged
        if found is None and loss_allowed(report.mode, power_loss, value in fsynced):
            report.lost += 1
            report.lost_max_age_ms = max(report.lost_max_age_ms, age_ms)
            continue
        raise AssertionError(
            f"{value!r} acknowledged at {loc} ({age_ms:.0f} ms before the kill"
            f"{', fsynced' if value in fsynced else ''}) is "
            f"{'missing' if found is None else f'at {found}'} (mode {report.mode})")
    report.acked += len(acked)
    cycle_prefix = f"c{cycle:05d}-".encode()
    report.in_doubt_stored += sum(
        1 for v in where if v.startswith(cycle_prefix) and v not in acked)

    # -- a real consumer reads the same records ---------------------------------------------
    _consumer_check(server.bootstrap, files, consumer_from, report)
    for p, state in files.items():
        consumer_from[p] = state.end_offset


def _consumer_check(bootstrap: str, files: dict[int, PartitionFiles], start: dict[int, int],
                    report: CrashReport) -> None:
    """Read [start, end) of every partition with confluent-kafka; compare with the files."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "crash-check",
                         "enable.auto.commit": False, "auto.offset.reset": "error",
                         "fetch.wait.max.ms": 20,
                         "log_level": 2})
    try:
        wanted = {p: (min(start[p], state.end_offset), state.end_offset) for p, state in files.items()}
        todo = {p for p, (lo, hi) in wanted.items() if hi > lo}
        consumer.assign([TopicPartition(TOPIC, p, wanted[p][0]) for p in todo])
        deadline = time.monotonic() + 60
        seen = {p: wanted[p][0] for p in todo}
        while todo:
            assert time.monotonic() < deadline, f"consumer stalled at {seen}"
            for msg in consumer.consume(num_messages=5000, timeout=0.2):
                if msg.error():
                    raise AssertionError(f"consumer error: {msg.error()}")
                p, offset = msg.partition(), msg.offset()
                if p not in todo or offset >= wanted[p][1]:
                    continue
                assert offset == seen[p], f"consumer got offset {offset} in partition {p}, expected {seen[p]}"
                assert files[p].values.get(offset) == msg.value(), f"consumer and files differ at {p}/{offset}"
                seen[p] = offset + 1
                report.consumer_read += 1
                if seen[p] >= wanted[p][1]:
                    todo.discard(p)
    finally:
        consumer.close()
