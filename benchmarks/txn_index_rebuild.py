"""What a partition with transactions costs at start-up, up to its first read_committed
answer (LSO and aborted transactions): before and after the on-disk ``.txnindex``.

Writes a partition of N MiB (16 KiB batches in 64 MiB segments, one transaction of 100
batches aborted in every 10), closes it cleanly, then times, alternating order, from the
page cache:

- before: open the log, then build the transaction index from the batch headers of the
  whole log (``PartitionTxns.rebuild`` over ``Log.txn_batches``: what the server did
  before the ``.txnindex`` files);
- after: open the log, then ask it (LSO from the producer snapshot, aborted
  transactions from the ``.txnindex`` files);

each after a clean stop and after an unclean one (a kill -9 whose recovery point is the
active segment's base: that segment is re-validated and, after, its index rebuilt).

    python -m benchmarks.txn_index_rebuild [--mib 256] [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kafkaproto.batch import parse_header
from kafkaproto.control import build_marker
from kafkaproto.records import build_batch
from logserver.log.config import LogConfig
from logserver.log.log import Log
from logserver.log.txn_index import PartitionTxns

from .stats import Spread

BATCH_RECORDS = 16
VALUE = b"x" * 1000
SEGMENT_BYTES = 64 << 20


def _fill(log: Log, mib: int) -> int:
    batches = mib * 1024 * 1024 // (BATCH_RECORDS * 1024)
    ts = int(time.time() * 1000)
    plain = build_batch([(None, VALUE, (), ts)] * BATCH_RECORDS)
    for i in range(batches):
        txn = i // 100
        if txn % 10 == 0:  # a transactional stretch, aborted at its end
            seq = (i % 100) * BATCH_RECORDS
            data = bytearray(build_batch([(None, VALUE, (), ts)] * BATCH_RECORDS, producer_id=txn,
                                         producer_epoch=0, base_sequence=seq, is_transactional=True))
            log.append(data, parse_header(data))
            if i % 100 == 99:
                marker = bytearray(build_marker(txn, 0, commit=False, coordinator_epoch=0,
                                                timestamp_ms=ts))
                log.append(marker, parse_header(marker))
        else:
            data = bytearray(plain)
            log.append(data, parse_header(data))
    return batches


def _before(directory: Path, config: LogConfig, recovery_point: int | None) -> int:
    log = Log(directory, config, clean_shutdown=recovery_point is None,
              recovery_point=recovery_point or 0)
    try:
        txns = PartitionTxns()
        txns.rebuild(log.txn_batches())
        txns.last_stable_offset(log.log_end_offset)
        return len(txns.aborted_between(0, log.log_end_offset))
    finally:
        log.close()


def _after(directory: Path, config: LogConfig, recovery_point: int | None) -> int:
    log = Log(directory, config, clean_shutdown=recovery_point is None,
              recovery_point=recovery_point or 0)
    try:
        log.last_stable_offset(log.log_end_offset)
        return len(log.aborted_txns(0, log.log_end_offset))
    finally:
        log.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.txn_index_rebuild",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    config = LogConfig(segment_bytes=SEGMENT_BYTES)
    with tempfile.TemporaryDirectory(prefix="txn-rebuild-") as workdir:
        directory = Path(workdir) / "t-0"
        log = Log(directory, config)
        batches = _fill(log, args.mib)
        active_base = log.active_segment.base_offset
        segments = len(log.segments)
        log.close()
        runs: dict[str, Callable[[], int]] = {
            "before, clean stop": lambda: _before(directory, config, None),
            "after, clean stop": lambda: _after(directory, config, None),
            "before, unclean stop": lambda: _before(directory, config, active_base),
            "after, unclean stop": lambda: _after(directory, config, active_base),
        }
        times: dict[str, list[float]] = {name: [] for name in runs}
        aborted: dict[str, int] = {}
        names = list(runs)
        for repeat in range(args.repeats):
            order = names if repeat % 2 == 0 else names[::-1]
            for name in order:
                started = time.perf_counter()
                aborted[name] = runs[name]()
                times[name].append(time.perf_counter() - started)
    assert len(set(aborted.values())) == 1, f"the variants disagree: {aborted}"
    print(f"start-up to the first read_committed answer, {args.mib} MiB partition, {segments} "
          f"segments, {batches} batches, {aborted[names[0]]} aborted transactions, "
          f"{args.repeats} repeats (min / median / max):")
    for name in names:
        spread = Spread.of(times[name])
        line = (f"  {name:22s} {spread.low * 1000:8.1f} / {spread.median * 1000:8.1f} / "
                f"{spread.high * 1000:8.1f} ms")
        if name.startswith("after"):
            before = Spread.of(times[name.replace("after", "before")])
            line += f"   (before/after {before.median / spread.median:.1f}x)"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
