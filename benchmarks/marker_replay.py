"""Producer state rebuilt from the log when markers are frequent, two source trees back
to back: ``python -m benchmarks.marker_replay --before DIR [--after DIR]``.

Made for the coordinator epoch in producer state (TRANSACTION_COORDINATOR_FENCED): the
replay now reads each marker's control record (16 bytes, one pread) besides the batch
headers. The worst case for that is many small transactions: per run, in the tree being
measured, a partition of ``--txns`` transactions (default 50,000; each one batch of 4
records of 100 bytes, then its commit marker, 10 producer ids), closed cleanly, its
producer snapshots removed; then the time to open it (the whole log replayed into the
producer state) is taken ``--opens`` times (default 3, page cache warm), the median kept.

Trees alternate in order (before/after, after/before, ...), ``--repeats`` runs each
(default 3); prints min/median/max and the ratio of medians. ``--before`` is a plain
copy of the older tree (``git archive COMMIT | tar -x -C DIR``, plus the built
``kafkaproto/*.so``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
PRODUCERS = 10


def one_run(txns: int, opens: int) -> dict[str, float]:
    from kafkaproto.batch import parse_header
    from kafkaproto.control import build_marker
    from kafkaproto.records import build_batch
    from logserver.log.config import LogConfig
    from logserver.log.log import Log

    config = LogConfig(segment_bytes=64 << 20)
    ts = int(time.time() * 1000)
    with tempfile.TemporaryDirectory(prefix="marker-replay-") as workdir:
        directory = Path(workdir) / "t-0"
        log = Log(directory, config)
        for i in range(txns):
            pid = i % PRODUCERS
            seq = (i // PRODUCERS) * 4
            data = bytearray(build_batch([(None, b"x" * 100, (), ts)] * 4, producer_id=pid,
                                         producer_epoch=0, base_sequence=seq,
                                         is_transactional=True))
            log.append(data, parse_header(data))
            marker = bytearray(build_marker(pid, 0, commit=True, coordinator_epoch=3,
                                            timestamp_ms=ts))
            log.append(marker, parse_header(marker))
        end = log.log_end_offset
        log.close()
        times = []
        for _ in range(opens):
            for snapshot in directory.glob("*.snapshot"):
                snapshot.unlink()
            started = time.perf_counter()
            log = Log(directory, config)
            times.append(time.perf_counter() - started)
            assert log.log_end_offset == end and len(log.producer_state.producers) == PRODUCERS
            log.close()
    return {"open_s": statistics.median(times)}


def _run_tree(tree: Path, args: argparse.Namespace) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run(
        [sys.executable, str(HERE), "--one", "--txns", str(args.txns), "--opens", str(args.opens)],
        env=env, cwd=tree, check=True, capture_output=True, text=True, timeout=900)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.marker_replay",
                                     description=__doc__)
    parser.add_argument("--before", type=Path, help="the older source tree")
    parser.add_argument("--after", type=Path, default=HERE.parent.parent,
                        help="the newer source tree (default: this one)")
    parser.add_argument("--txns", type=int, default=50_000)
    parser.add_argument("--opens", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one_run(args.txns, args.opens)))
        return 0
    if args.before is None:
        parser.error("--before DIR is required")
    sys.path.insert(0, str(HERE.parent.parent))
    from benchmarks.stats import Spread

    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    results: dict[str, list[float]] = {"before": [], "after": []}
    for repeat in range(args.repeats):
        order = ["before", "after"] if repeat % 2 == 0 else ["after", "before"]
        for name in order:
            seconds = _run_tree(trees[name], args)["open_s"]
            results[name].append(seconds)
            print(f"run {repeat + 1} {name}: open with replay {seconds * 1000:.1f} ms", flush=True)
    print(f"{args.txns} transactions ({2 * args.txns} batches, half of them markers), "
          f"{args.repeats} runs each (min / median / max):")
    spreads = {name: Spread.of(values) for name, values in results.items()}
    for name, spread in spreads.items():
        print(f"  {name:6} {spread.low * 1000:8.1f} / {spread.median * 1000:8.1f} / "
              f"{spread.high * 1000:8.1f} ms")
    ratio = spreads["after"].median / spreads["before"].median
    overlap = "ranges overlap" if spreads["after"].overlaps(spreads["before"]) else "ranges apart"
    print(f"  after / before: {ratio:.2f}x ({overlap})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
