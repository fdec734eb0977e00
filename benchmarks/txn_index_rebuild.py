"""What the first read_committed fetch of a partition costs after a start: building its
transaction index (open transactions, aborted list) from the batch headers of its log.

Writes a partition of N MiB (16 KiB batches, one transaction of 100 batches aborted in
every 10), closes and reopens it, and times ``PartitionTxns.rebuild`` over
``Log.txn_batches`` against a plain walk of every batch header (the floor), alternating
order, from the page cache.

    python -m benchmarks.txn_index_rebuild [--mib 256] [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from kafkaproto.batch import parse_header
from kafkaproto.control import build_marker
from kafkaproto.records import build_batch
from logserver.log.log import Log
from logserver.log.txn_index import PartitionTxns

from .stats import Spread

BATCH_RECORDS = 16
VALUE = b"x" * 1000


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
                marker = build_marker(txn, 0, commit=False, coordinator_epoch=0, timestamp_ms=ts)
                log.append(marker, parse_header(marker))
        else:
            data = bytearray(plain)
            log.append(data, parse_header(data))
    return batches


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.txn_index_rebuild",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="txn-rebuild-") as workdir:
        directory = Path(workdir) / "t-0"
        log = Log(directory)
        batches = _fill(log, args.mib)
        log.close()
        log = Log(directory)
        try:
            rebuild: list[float] = []
            walk: list[float] = []
            aborted = 0
            for repeat in range(args.repeats):
                for name in (("rebuild", "walk") if repeat % 2 == 0 else ("walk", "rebuild")):
                    started = time.perf_counter()
                    if name == "rebuild":
                        txns = PartitionTxns()
                        txns.rebuild(log.txn_batches())
                        aborted = len(txns.aborted_between(0, log.log_end_offset))
                        rebuild.append(time.perf_counter() - started)
                    else:
                        with log.local.pinned_segments() as segments:
                            for seg in segments:
                                for _ in seg.iter_headers(0):
                                    pass
                        walk.append(time.perf_counter() - started)
        finally:
            log.close()
    r, w = Spread.of(rebuild), Spread.of(walk)
    print(f"transaction index rebuild, {args.mib} MiB partition, {batches} batches, "
          f"{aborted} aborted transactions, {args.repeats} repeats:")
    print(f"  rebuild      median {r.median * 1000:8.1f} ms [{r.low * 1000:.1f}-{r.high * 1000:.1f}]")
    print(f"  header walk  median {w.median * 1000:8.1f} ms [{w.low * 1000:.1f}-{w.high * 1000:.1f}]"
          f"  (rebuild/walk {r.median / w.median:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
