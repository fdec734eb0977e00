"""Validation of compressed produce batches: off, on the loop, on a pool thread.

``python -m benchmarks.validate_offload``: issue 11 budgets full validation of produced
batches (capped decompression and the walk of every record) at 15% of produce
throughput. Three servers, each fresh per run, back to back in rotating order,
``--runs`` rounds:

- ``no-validation``: a benchmark-only launcher swaps the produce check for the header
  and CRC check alone (what the server did before issue 11; never a server setting);
- ``loop``: ``--produce.validation.thread.min.bytes -1``, every batch validated on the
  event loop;
- ``thread``: as shipped (64 KiB), zstd batches of that size or more are validated on
  a pool thread (logserver.validation_offload).

``--producers`` processes pipeline compressed batches (1,000 keyed 1 KiB hex-text
records, ~1 MB uncompressed; ``--codec``) to partitions of their own, 2 in flight,
acks=1; the figure is MB/s of uncompressed records acknowledged. A probe sends one
100 B record every 5 ms and times its round trips (p50, p99).

    python -m benchmarks.validate_offload --runs 3 --seconds 5 --codec zstd
"""

from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
import tempfile
import time
from pathlib import Path

from kafkaproto.batch import Compression
from kafkaproto.validate import validate_batch

from .large_appends import _create_topic, large_producer, small_producer
from .stats import Spread, compare, spread_text
from .targets import LogserverTarget
from .validate_bench import SERVER_CAP, realistic_batch

WARMUP_S = 1.0
OFFLOAD_MIN_BYTES = 65_536

# Runs logserver with the header and CRC check in place of full validation (benchmark only).
_NO_VALIDATION = """
import runpy, sys
from typing import NamedTuple
import logserver.partition as partition
from kafkaproto.batch import validate_produce_records

class _Checked(NamedTuple):
    header: object

def _header_only(records, **_ignored):
    return _Checked(validate_produce_records(records))

partition.validate_batch = _header_only
sys.argv[0] = "logserver"
runpy.run_module("logserver", run_name="__main__", alter_sys=True)
"""


class UnvalidatedLogserver(LogserverTarget):
    """logserver with only the header and CRC checked on produce (benchmark only)."""

    name = "logserver-no-validation"

    def command(self, port: int) -> list[str]:
        argv = super().command(port)
        return [argv[0], "-c", _NO_VALIDATION, *argv[3:]]


VARIANTS = ("no-validation", "loop", "thread")


def one_run(variant: str, batch: bytes, counted: int, producers: int, seconds: float
            ) -> tuple[float, float, float]:
    """(MB/s of uncompressed records, probe p50 ms, probe p99 ms) of one fresh server."""
    # The shipped default sends zstd batches to the thread: "loop" turns that off.
    extra = ["--produce.validation.thread.min.bytes",
             str(OFFLOAD_MIN_BYTES) if variant == "thread" else "-1"]
    cls = UnvalidatedLogserver if variant == "no-validation" else LogserverTarget
    with tempfile.TemporaryDirectory(prefix="validate-offload-") as tmp, \
            cls(Path(tmp), extra) as server:
        bootstrap = server.bootstrap
        assert bootstrap is not None
        _create_topic(bootstrap, producers + 1)
        start_at = time.time() + WARMUP_S + 0.5
        ctx = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(producers + 1, mp_context=ctx) as pool:
            big = [pool.submit(large_producer, bootstrap, p, 2, start_at, seconds, batch, counted)
                   for p in range(producers)]
            probe = pool.submit(small_producer, bootstrap, producers, start_at, seconds)
            acked = sum(f.result(timeout=seconds + 60) for f in big)
            latencies = sorted(probe.result(timeout=seconds + 60))
    p50 = latencies[len(latencies) // 2]
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return acked / seconds / 1e6, p50, p99


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--producers", type=int, default=3)
    parser.add_argument("--codec", default="zstd", choices=["gzip", "snappy", "lz4", "zstd"])
    args = parser.parse_args(argv)
    codec = Compression[args.codec.upper()]
    batch = realistic_batch(1024, 1000, codec, fit=SERVER_CAP)
    counted = validate_batch(batch, max_uncompressed_bytes=SERVER_CAP).uncompressed_size
    print(f"{args.codec} batch: {len(batch):,} bytes, records {counted:,} bytes uncompressed")
    figures: dict[str, list[tuple[float, float, float]]] = {v: [] for v in VARIANTS}
    for run in range(args.runs):
        order = VARIANTS[run % 3:] + VARIANTS[:run % 3]
        for variant in order if run % 2 == 0 else order[::-1]:
            result = one_run(variant, batch, counted, args.producers, args.seconds)
            figures[variant].append(result)
            print(f"run {run + 1} {variant:13s}: {result[0]:7.1f} MB/s; probe p50 "
                  f"{result[1]:6.2f} ms, p99 {result[2]:7.2f} ms", flush=True)
    spreads = {v: [Spread.of([r[i] for r in runs]) for i in range(3)]
               for v, runs in figures.items()}
    print(f"\n{args.producers} producers, {args.codec}, {args.seconds:.0f} s windows, "
          f"{args.runs} runs each (median [min-max]):")
    for variant, (rate, p50, p99) in spreads.items():
        print(f"  {variant:13s} {spread_text(rate, 1, 'MB/s')}; probe p50 "
              f"{spread_text(p50, 2, 'ms')}, p99 {spread_text(p99, 2, 'ms')}")
    base = spreads["no-validation"][0]
    for variant in ("loop", "thread"):
        verdict = compare(spreads[variant][0], base, higher_is_better=True)
        print(f"  {variant} vs no-validation, throughput: "
              f"{verdict.text() if verdict else 'no ratio'} (budget: >= 0.85x)")
    for i, what in ((0, "throughput"), (1, "probe p50"), (2, "probe p99")):
        verdict = compare(spreads["thread"][i], spreads["loop"][i], higher_is_better=i == 0)
        print(f"  thread vs loop, {what}: {verdict.text() if verdict else 'no ratio'}")


if __name__ == "__main__":
    main()
