"""Many small produce requests pipelined on one connection: the server's per-request cost.

With one record per request the server's work per request is small, so what a response
costs on the way out (one socket ``write()`` each, or one per batch of responses ready
together) shows in the figure. Two clients, each on its own fresh logserver:

- ``raw``: ``kafka_raw.produce_batches`` with one 100 B record per Produce request and
  ``--in-flight`` requests pipelined on one connection (acks=1).
- ``librdkafka``: confluent-kafka with ``linger.ms=0`` and ``batch.num.messages=1`` (one
  record per request), idempotence off so requests pipeline freely (acks=1).

Each run lasts ``--seconds`` of steady state after a 1 s warm-up; the figure is requests
acknowledged per second, ``--runs`` times, printed as min/median/max. ``--profile DIR``
also records the server with ``py-spy record --nonblocking`` during the last run of each
client and prints the leaf frames holding the most samples.

    python -m benchmarks.small_requests --runs 3 --seconds 8 --profile /tmp/prof
"""

from __future__ import annotations

import argparse
import collections
import logging
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .kafka_raw import produce_batches
from .targets import LogserverTarget

log = logging.getLogger(__name__)

TOPIC = "small-requests"
RECORD_BYTES = 100
WARMUP_S = 1.0


def _create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1)])
    for future in futures.values():
        future.result(timeout=30)


def run_raw(bootstrap: str, seconds: float, in_flight: int) -> float:
    """Requests per second of one-record Produce requests, ``in_flight`` pipelined."""
    produce_batches(bootstrap, TOPIC, RECORD_BYTES, 10**12, batch_bytes=1, in_flight=in_flight,
                    acks=1, time_cap=WARMUP_S)
    records, _, elapsed = produce_batches(
        bootstrap, TOPIC, RECORD_BYTES, 10**12, batch_bytes=1, in_flight=in_flight, acks=1,
        time_cap=seconds)
    return records / elapsed


def run_librdkafka(bootstrap: str, seconds: float) -> float:
    """Records (= requests) per second acknowledged to confluent-kafka, linger.ms=0."""
    producer = Producer({
        "bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1, "acks": 1,
        "enable.idempotence": False, "queue.buffering.max.messages": 100_000,
    })  # fmt: skip
    acked = 0

    def on_delivery(err: object, _msg: object) -> None:
        nonlocal acked
        if err is None:
            acked += 1

    value = b"x" * RECORD_BYTES
    start = time.perf_counter()
    measured_from = start + WARMUP_S
    stop_at = measured_from + seconds
    acked_at_start = -1
    while True:
        now = time.perf_counter()
        if acked_at_start < 0 and now >= measured_from:
            acked_at_start, measured_from = acked, now
        if now >= stop_at:
            break
        try:
            producer.produce(TOPIC, value, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.001)
            continue
        producer.poll(0)
    elapsed = time.perf_counter() - measured_from
    count = acked - acked_at_start
    producer.purge()
    producer.flush(10)
    return count / elapsed


def _profile(pid: int, out: Path, seconds: float) -> subprocess.Popen[bytes]:
    py_spy = shutil.which("py-spy")
    if py_spy is None:
        raise SystemExit("py-spy not found: pip install py-spy")
    return subprocess.Popen(
        [py_spy, "record", "--nonblocking", "--format", "raw", "--rate", "250",
         "--duration", str(int(seconds)), "--pid", str(pid), "--output", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


def leaf_frames(collapsed: Path, top: int = 12) -> list[tuple[float, str]]:
    """(share of samples, leaf frame) from py-spy's raw (collapsed stack) output."""
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack:
            continue
        counts[stack.split(";")[-1]] += int(n)
        total += int(n)
    return [(n / total, frame) for frame, n in counts.most_common(top)] if total else []


def _measure(name: str, runs: int, seconds: float, in_flight: int,
             profile_dir: Path | None) -> list[float]:
    figures: list[float] = []
    for run in range(runs):
        with tempfile.TemporaryDirectory(prefix="small-requests-") as tmp, \
                LogserverTarget(Path(tmp)) as server:
            bootstrap = server.bootstrap
            assert bootstrap is not None
            _create_topic(bootstrap)
            spy = None
            out = None
            if profile_dir is not None and run == runs - 1:
                profile_dir.mkdir(parents=True, exist_ok=True)
                out = profile_dir / f"{name}.txt"
                pid = server.pid()
                assert pid is not None
                spy = _profile(pid, out, seconds + WARMUP_S)
            if name == "raw":
                figure = run_raw(bootstrap, seconds, in_flight)
            else:
                figure = run_librdkafka(bootstrap, seconds)
            if spy is not None:
                spy.wait(timeout=60)
        figures.append(figure)
        print(f"  {name} run {run + 1}: {figure:,.0f} requests/s", flush=True)
        if out is not None and out.exists():
            print(f"  py-spy leaf frames ({name}, last run):")
            for share, frame in leaf_frames(out):
                print(f"    {share:6.1%}  {frame}")
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0, help="measured seconds per run")
    parser.add_argument("--in-flight", type=int, default=32, help="raw client's pipeline depth")
    parser.add_argument("--clients", default="raw,librdkafka")
    parser.add_argument("--profile", type=Path, help="directory for py-spy output")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    for name in args.clients.split(","):
        figures = _measure(name, args.runs, args.seconds, args.in_flight, args.profile)
        print(f"{name}: min {min(figures):,.0f} / median {statistics.median(figures):,.0f} / "
              f"max {max(figures):,.0f} requests/s over {len(figures)} runs", flush=True)


if __name__ == "__main__":
    main()
