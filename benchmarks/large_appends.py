"""Large appends on the writer thread or on the event loop: ``python -m benchmarks.large_appends``.

With 1 MB produce batches most of the server's samples sat in the segment ``pwrite`` on
the event loop: every connection waited meanwhile. ``log.writer.thread.min.bytes``
hands batches at least that large to a writer thread (logserver.log.append_writer).
This compares the two settings on fresh servers, back to back, alternating which goes
first, ``--runs`` rounds:

- ``--producers`` processes each pipeline 1 MB batches (``--in-flight`` each, acks=1) to
  a partition of their own; the figure is MB/s acknowledged in the window.
- one more process sends one 100 B record per Produce request to a partition of its
  own, one every 5 ms (a probe, not a load: a faster probe would take server time from
  the producers whenever the loop answers it quickly): its round-trip latency (p50,
  p99, max) shows how long the loop was busy elsewhere.

Each run: a 1 s warm-up, then ``--seconds`` measured. ``--profile`` adds one more run
per setting under ``py-spy record --nonblocking --threads`` and prints the share of the
server's samples in ``pwrite`` on the event-loop thread and on the writer thread (py-spy
shows a C call as the Python line making it: ``Segment.append``'s ``pwrite`` line).

    python -m benchmarks.large_appends --runs 3 --seconds 5 --profile
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import multiprocessing
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from kafkaproto import ApiKey, encode_request
from kafkaproto.messages import ProduceRequest
from kafkaproto.records import build_batch

from .kafka_raw import CLIENT_ID, RawClientError, RawConnection
from .stats import Spread, compare, spread_text
from .targets import LogserverTarget

TOPIC = "large-appends"
WARMUP_S = 1.0
THRESHOLD = 256 * 1024
SETTINGS = {"event-loop": -1, "writer-thread": THRESHOLD}
VALUE_BYTES = 10_000
RECORDS_PER_BATCH = 100  # 1,000,000 value bytes: a ~1 MB batch, under message.max.bytes
PROBE_INTERVAL_S = 0.005


def _frame(conn: RawConnection, partition: int, batch: bytes) -> tuple[int, bytes]:
    version = conn.version_for(ApiKey.PRODUCE, 7, 9)  # v7+: zstd allowed
    request = ProduceRequest(
        transactional_id=None, acks=1, timeout_ms=30_000,
        topic_data=[ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
            ProduceRequest.PartitionProduceData(index=partition, records=batch)])],
    )  # fmt: skip
    return version, encode_request(ApiKey.PRODUCE, version, 0, CLIENT_ID, request)


def _check(conn: RawConnection) -> None:
    body = conn.receive_response().body
    part = body.responses[0].partition_responses[0]  # type: ignore[union-attr]
    if part.error_code:
        raise RawClientError(f"produce error code {part.error_code}")


def large_producer(bootstrap: str, partition: int, in_flight: int, start_at: float,
                   seconds: float, batch: bytes | None = None, counted: int = 0) -> float:
    """Bytes of 1 MB batches acknowledged between ``start_at`` and ``start_at + seconds``.

    ``batch`` replaces the default uncompressed one; each acknowledgement then counts
    ``counted`` bytes (its records' uncompressed size).
    """
    if batch is None:
        value = bytes(range(256)) * (VALUE_BYTES // 256) + bytes(VALUE_BYTES % 256)
        batch = build_batch([(None, value, [], int(time.time() * 1000))] * RECORDS_PER_BATCH)
        counted = len(batch)
    end_at = start_at + seconds
    acked = pending = 0
    with RawConnection(bootstrap) as conn:
        version, frame = _frame(conn, partition, batch)
        while True:
            now = time.time()
            while pending < in_flight and now < end_at:
                conn.resend(ApiKey.PRODUCE, version, frame)
                pending += 1
            if not pending:
                break
            _check(conn)
            pending -= 1
            if start_at <= time.time() <= end_at:
                acked += counted
    return float(acked)


def small_producer(bootstrap: str, partition: int, start_at: float, seconds: float,
                   interval_s: float = PROBE_INTERVAL_S) -> list[float]:
    """Round trips (ms) of one-record Produce requests, one every ``interval_s`` at most."""
    batch = build_batch([(None, b"s" * 100, [], int(time.time() * 1000))])
    end_at = start_at + seconds
    latencies: list[float] = []
    with RawConnection(bootstrap) as conn:
        version, frame = _frame(conn, partition, batch)
        while (now := time.time()) < end_at:
            sent = time.perf_counter()
            conn.resend(ApiKey.PRODUCE, version, frame)
            _check(conn)
            done = time.perf_counter()
            if now >= start_at:
                latencies.append((done - sent) * 1000)
            time.sleep(max(0.0, interval_s - (done - sent)))
    return latencies


@dataclass
class RunResult:
    mb_per_s: float
    p50_ms: float
    p99_ms: float
    max_ms: float


def _create_topic(bootstrap: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(TOPIC, num_partitions=partitions, replication_factor=1)])
    for future in futures.values():
        future.result(timeout=30)


def _py_spy(pid: int, out: Path, seconds: float) -> subprocess.Popen[bytes]:
    py_spy = shutil.which("py-spy")
    if py_spy is None:
        raise SystemExit("py-spy not found: pip install -e '.[bench]'")
    return subprocess.Popen(
        [py_spy, "record", "--nonblocking", "--threads", "--format", "raw", "--rate", "200",
         "--duration", str(max(1, int(seconds))), "--pid", str(pid), "--output", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip


def pwrite_shares(collapsed: Path) -> dict[str, float]:
    """Share of all server samples per thread, and in ``pwrite`` per thread (py-spy
    ``--threads`` raw output: the first frame names the thread, the last is the leaf)."""
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack:
            continue
        frames = stack.split(";")
        name = frames[0].rpartition(":")[2].strip()
        thread = "loop" if name == "MainThread" else "writer" if "log-writer" in name else "other"
        count = int(n)
        total += count
        counts[thread] += count
        if frames[-1].startswith("Segment.append "):
            counts[f"{thread} pwrite"] += count
    return {key: value / total for key, value in counts.items()} if total else {}


def one_run(setting: str, producers: int, in_flight: int, seconds: float,
            profile: Path | None = None) -> RunResult:
    extra = ["--log.writer.thread.min.bytes", str(SETTINGS[setting])]
    with tempfile.TemporaryDirectory(prefix="large-appends-") as tmp, \
            LogserverTarget(Path(tmp), extra) as server:
        bootstrap = server.bootstrap
        assert bootstrap is not None
        _create_topic(bootstrap, producers + 1)
        start_at = time.time() + WARMUP_S + 0.5  # processes start within the half second
        spy = None
        if profile is not None:
            pid = server.pid()
            assert pid is not None
            spy = _py_spy(pid, profile, seconds)
        ctx = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(producers + 1, mp_context=ctx) as pool:
            big = [pool.submit(large_producer, bootstrap, p, in_flight, start_at, seconds)
                   for p in range(producers)]
            small = pool.submit(small_producer, bootstrap, producers, start_at, seconds)
            acked = sum(f.result(timeout=seconds + 60) for f in big)
            latencies = sorted(small.result(timeout=seconds + 60))
        if spy is not None:
            _, err = spy.communicate(timeout=60)
            if spy.returncode:
                print(f"  py-spy failed ({spy.returncode}): {err.decode(errors='replace')[-400:]}")
    if not latencies:
        raise RuntimeError("the small-record producer got no response in the window")
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return RunResult(acked / seconds / 1e6, statistics.median(latencies), p99, latencies[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds per run")
    parser.add_argument("--producers", type=int, default=3, help="1 MB batch producers")
    parser.add_argument("--in-flight", type=int, default=2, help="pipelined batches each")
    parser.add_argument("--profile", action="store_true", help="one py-spy run per setting")
    args = parser.parse_args(argv)
    results: dict[str, list[RunResult]] = {name: [] for name in SETTINGS}
    names = list(SETTINGS)
    for run in range(args.runs):
        for name in names if run % 2 == 0 else names[::-1]:
            result = one_run(name, args.producers, args.in_flight, args.seconds)
            results[name].append(result)
            print(f"run {run + 1} {name:13s}: {result.mb_per_s:7.1f} MB/s; small record "
                  f"p50 {result.p50_ms:6.2f} ms, p99 {result.p99_ms:6.2f} ms, "
                  f"max {result.max_ms:6.1f} ms", flush=True)
    print(f"\n{args.producers} producers x {args.in_flight} in flight, 1 MB batches, "
          f"{args.seconds:.0f} s windows, {args.runs} runs each (median [min-max]):")
    spreads = {}
    for name, runs in results.items():
        spreads[name] = {key: Spread.of([getattr(r, key) for r in runs])
                         for key in ("mb_per_s", "p50_ms", "p99_ms", "max_ms")}
        s = spreads[name]
        print(f"  {name:13s} {spread_text(s['mb_per_s'], 1, 'MB/s')}; small record p50 "
              f"{spread_text(s['p50_ms'], 2, 'ms')}, p99 {spread_text(s['p99_ms'], 2, 'ms')}, "
              f"max {spread_text(s['max_ms'], 1, 'ms')}")
    on, off = spreads["writer-thread"], spreads["event-loop"]
    for key, higher in (("mb_per_s", True), ("p50_ms", False), ("p99_ms", False)):
        verdict = compare(on[key], off[key], higher_is_better=higher)
        print(f"  writer thread vs event loop, {key}: "
              f"{verdict.text() if verdict else 'no ratio'}")
    if args.profile:
        print("\npy-spy --nonblocking --threads, one run each (share of all server samples):")
        for name in names:
            with tempfile.TemporaryDirectory(prefix="large-appends-spy-") as spy_dir:
                out = Path(spy_dir) / f"{name}.txt"
                one_run(name, args.producers, args.in_flight, args.seconds, profile=out)
                if not out.exists():
                    print(f"  {name}: py-spy wrote nothing (cannot attach here?)")
                    continue
                shares = pwrite_shares(out)
                print(f"  {name:13s} " + ", ".join(
                    f"{key} {value:.0%}" for key, value in sorted(shares.items())))


if __name__ == "__main__":
    main()
