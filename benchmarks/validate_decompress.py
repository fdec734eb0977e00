"""CPU and page faults of validating one librdkafka batch: ``python -m benchmarks.validate_decompress``.

Captures real batches first: a confluent-kafka producer (1 KiB hex-text records, 1 MB
batches, ``compression.type`` per codec) writes to a no-validation logserver, and the
first batch of its log is read back. Then ``validate_batch`` runs on it in process,
``--runs`` sets of 30 calls, and prints the CPU time (``thread_time``) and the minor page
faults per call (min / median / max over the sets), twice: as is, and with glibc asked
to hand freed memory back to the kernel after every call (``malloc_trim(0)``), which is
what a busy server's allocator ends up doing between batches. Run it at two commits for
a before/after.

    python -m benchmarks.validate_decompress --runs 5 --codecs lz4,zstd --batches /tmp/b
"""

from __future__ import annotations

import argparse
import ctypes
import resource
import statistics
import tempfile
import time
from pathlib import Path

from kafkaproto.batch import parse_header
from kafkaproto.validate import validate_batch

from .validate_clients import produce_window
from .validate_offload import UnvalidatedLogserver

CAP = 1_048_588  # message.max.bytes
CALLS = 30


def capture(codec: str) -> bytearray:
    """The first whole batch a librdkafka producer wrote with ``codec``."""
    with tempfile.TemporaryDirectory(prefix="validate-decompress-") as tmp, \
            UnvalidatedLogserver(Path(tmp)) as server:
        assert server.bootstrap is not None
        produce_window(server.bootstrap, codec, 1.0, server)
        segment = min(server.data_dir.glob("validate-clients-0/*.log"))
        data = segment.read_bytes()
    header = parse_header(data, 0)
    return bytearray(data[:header.size])


def per_call(batch: bytearray, trim: bool) -> tuple[float, float]:
    """(µs of CPU, minor page faults) per validate_batch call."""
    libc = ctypes.CDLL("libc.so.6")
    validate_batch(batch, max_uncompressed_bytes=CAP)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.thread_time()
    for _ in range(CALLS):
        validate_batch(batch, max_uncompressed_bytes=CAP)
        if trim:
            libc.malloc_trim(0)
    cpu = (time.thread_time() - start) / CALLS * 1e6
    return cpu, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / CALLS


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--codecs", default="lz4,zstd")
    parser.add_argument("--batches", type=Path,
                        help="directory keeping the captured batches (codec.batch), so that "
                             "runs at two commits validate the same bytes")
    args = parser.parse_args(argv)
    for codec in args.codecs.split(","):
        codec = codec.strip()
        kept = args.batches / f"{codec}.batch" if args.batches else None
        if kept is not None and kept.exists():
            batch = bytearray(kept.read_bytes())
        else:
            batch = capture(codec)
            if kept is not None:
                kept.parent.mkdir(parents=True, exist_ok=True)
                kept.write_bytes(batch)
        print(f"{codec}: librdkafka batch of {len(batch):,} bytes")
        figures: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        for run in range(args.runs):
            for trim in (False, True) if run % 2 == 0 else (True, False):
                figures[trim].append(per_call(batch, trim))
        for trim, runs in figures.items():
            cpu = sorted(r[0] for r in runs)
            faults = statistics.median(r[1] for r in runs)
            print(f"  {'malloc_trim after each' if trim else 'as is':23s} {cpu[0]:6.0f} "
                  f"{statistics.median(cpu):6.0f} {cpu[-1]:6.0f} us CPU per batch "
                  f"(min median max), {faults:5.0f} page faults per batch")


if __name__ == "__main__":
    main()
