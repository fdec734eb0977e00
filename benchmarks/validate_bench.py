"""Cost of full record-batch validation: ``python -m benchmarks.validate_bench``.

Two parts, each repeated ``--runs`` times (min / median / max):

1. In-process: ``validate_produce_records`` (header + CRC, today's produce check) against
   ``validate_batch`` (also capped decompression and the walk of every record), with the
   compiled walk and with its pure-Python fallback, on realistic batches: 1 KiB records
   x 1,000 and 100 B records x 10,000, uncompressed and with each codec.
2. End to end (``--no-server`` skips it): two real logservers on 127.0.0.1, one as it is
   and one with its produce check swapped for ``validate_batch`` by a start-up shim (the
   wiring the lead will make in logserver/partition.py), take turns at the same pipelined
   Produce requests (the batches above, trimmed under message.max.bytes); the figures are
   the server's CPU time per request and the wall-clock throughput.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks.kafka_raw import RawConnection
from benchmarks.targets import LogserverTarget
from kafkaproto import ApiKey, decode_response, encode_request, validate
from kafkaproto.batch import Compression, validate_produce_records
from kafkaproto.messages import ProduceRequest
from kafkaproto.records import RecordTuple, build_batch

# Decompressed-size cap for the in-process part: above the 100 B x 10,000 batch's 1.23 MB
# (a batch the server itself would refuse past message.max.bytes, 1048588, the shim's cap).
CAP = 4 << 20
SERVER_CAP = 1_048_588
SHAPES = {"1KiBx1000": (1024, 1000), "100Bx10000": (100, 10_000)}

# Runs logserver with validate_batch in place of its produce check (benchmark only).
_SHIM = f"""
import runpy, sys
import logserver.partition as partition
from kafkaproto.validate import validate_batch

def _full_check(records):
    return validate_batch(records, max_uncompressed_bytes={SERVER_CAP}).header

partition.validate_produce_records = _full_check
sys.argv[0] = "logserver"
runpy.run_module("logserver", run_name="__main__", alter_sys=True)
"""


@dataclass
class Figures:
    """One measured quantity over the runs."""

    values: list[float]

    def text(self, unit: str, scale: float = 1.0) -> str:
        low, mid, high = (min(self.values), statistics.median(self.values), max(self.values))
        return f"{low / scale:10.1f} {mid / scale:10.1f} {high / scale:10.1f} {unit}"


def realistic_batch(
    value_size: int, count: int, codec: Compression, fit: int | None = None
) -> bytes:
    """Keyed records with hex-text values (about 2:1 compressible) and rising timestamps.

    With ``fit``, fewer records if needed so the records stay under ``fit`` bytes
    uncompressed (what the server accepts).
    """
    now = int(time.time() * 1000)
    if fit is not None:
        count = min(count, fit // (value_size + 24))
    records: list[RecordTuple] = [
        (
            f"device-{i % 500:05d}".encode(),
            os.urandom(value_size // 2).hex().encode(),
            [],
            now + i // 10,
        )
        for i in range(count)
    ]
    return build_batch(records, compression=codec)


def per_batch_seconds(check: Callable[[bytes], object], batch: bytes, min_time: float) -> float:
    """Seconds one call takes, averaged over as many calls as fill ``min_time``."""
    calls = 0
    start = time.perf_counter()
    elapsed = 0.0
    while elapsed < min_time or calls < 3:
        check(batch)
        calls += 1
        elapsed = time.perf_counter() - start
    return elapsed / calls


def bench_in_process(runs: int, min_time: float, codecs: list[Compression]) -> None:
    walks = {"c": validate._walk, "python": validate._walk_python}

    def full(walk_name: str) -> Callable[[bytes], object]:
        def check(batch: bytes) -> object:
            validate._walk = walks[walk_name]
            try:
                return validate.validate_batch(batch, max_uncompressed_bytes=CAP)
            finally:
                validate._walk = walks["c"]

        return check

    checks: dict[str, Callable[[bytes], object]] = {
        "current (header+CRC)": validate_produce_records,
        "validate_batch (C walk)": full("c"),
        "validate_batch (Py walk)": full("python"),
    }
    print(f"walk implementation installed: {validate.WALK_IMPLEMENTATION}")
    print(f"{'shape':<12} {'codec':<7} {'check':<26} {'min':>10} {'median':>10} {'max':>10}")
    for shape, (value_size, count) in SHAPES.items():
        for codec in codecs:
            batch = realistic_batch(value_size, count, codec)
            data_bytes = validate.validate_batch(batch, max_uncompressed_bytes=CAP).uncompressed_size
            base: list[float] = []
            for name, check in checks.items():
                seconds = [per_batch_seconds(check, batch, min_time) for _ in range(runs)]
                if name.startswith("current"):
                    base = seconds
                records = Figures([count / s for s in seconds])
                mbytes = Figures([data_bytes / s for s in seconds])
                usec = Figures([s * 1e6 for s in seconds])
                print(f"{shape:<12} {codec.name:<7} {name:<26} {usec.text('us/batch')}")
                print(f"{'':<12} {'':<7} {'':<26} {records.text('Mrec/s', 1e6)}")
                print(f"{'':<12} {'':<7} {'':<26} {mbytes.text('MB/s', 1e6)}")
                if not name.startswith("current"):
                    extra = Figures([(s - b) * 1e6 for s, b in zip(seconds, base, strict=True)])
                    print(f"{'':<12} {'':<7} {'':<26} {extra.text('us added per batch')}")
            print(f"{'':<12} {'':<7} batch {len(batch)} bytes, records {data_bytes} bytes")


class ShimmedLogserver(LogserverTarget):
    """logserver with validate_batch as its produce check (the lead's one-call wiring)."""

    name = "logserver-validated"

    def command(self, port: int) -> list[str]:
        argv = super().command(port)
        return [argv[0], "-c", _SHIM, *argv[3:]]


def produce_repeatedly(bootstrap: str, topic: str, batch: bytes, requests: int) -> float:
    """Send ``batch`` ``requests`` times, 4 in flight (as a producer pipelines); seconds."""
    with RawConnection(bootstrap) as conn:
        version = conn.version_for(ApiKey.PRODUCE, 7, 9)  # v7+: zstd allowed
        request = ProduceRequest(
            transactional_id=None, acks=1, timeout_ms=30_000,
            topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=batch)])],
        )  # fmt: skip
        frame = encode_request(ApiKey.PRODUCE, version, 1, "validate-bench", request)
        sent = acked = 0
        start = time.perf_counter()
        while acked < requests:
            while sent - acked < 4 and sent < requests:
                conn.sock.sendall(frame)
                sent += 1
            _, body = decode_response(ApiKey.PRODUCE, version, conn.receive_frame())
            error = body.responses[0].partition_responses[0].error_code  # type: ignore[attr-defined]
            if error:
                raise RuntimeError(f"produce refused with error code {error}")
            acked += 1
        return time.perf_counter() - start


def bench_end_to_end(runs: int, requests: int, codecs: list[Compression]) -> None:
    """Both servers run at once and take turns, so load from elsewhere hits both alike.

    Wall-clock throughput on a shared machine swings with other processes; the server's
    own CPU time per request (utime + stime from /proc) is the steadier cost figure.
    """
    print(f"\nend to end: {requests} pipelined produce requests per run, acks=1, "
          "server CPU per request and wall-clock MB/s of records")
    print(f"{'shape':<12} {'codec':<7} {'server':<16} {'min':>10} {'median':>10} {'max':>10}")
    summary = []
    with tempfile.TemporaryDirectory(prefix="validate-bench-") as tmp:
        labels = ("current", "validate_batch")
        workdirs = {label: Path(tmp) / label for label in labels}
        for workdir in workdirs.values():
            workdir.mkdir()
        with LogserverTarget(workdirs["current"]) as current, ShimmedLogserver(
            workdirs["validate_batch"]
        ) as validated:
            servers = {"current": current, "validate_batch": validated}
            for shape, (value_size, count) in SHAPES.items():
                for codec in codecs:
                    batch = realistic_batch(value_size, count, codec, fit=SERVER_CAP)
                    data_bytes = validate.validate_batch(
                        batch, max_uncompressed_bytes=CAP
                    ).uncompressed_size
                    topic = f"bench-{shape.lower()}-{codec.name.lower()}"
                    for server in servers.values():
                        admin = AdminClient({"bootstrap.servers": str(server.bootstrap)})
                        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=60)
                        del admin  # its threads end with it, before the servers stop
                        produce_repeatedly(str(server.bootstrap), topic, batch, 10)  # warm up
                    cpu: dict[str, list[float]] = {label: [] for label in labels}
                    rate: dict[str, list[float]] = {label: [] for label in labels}
                    for run in range(runs):
                        for label in labels if run % 2 == 0 else labels[::-1]:
                            server = servers[label]
                            before = server.cpu_seconds() or 0.0
                            seconds = produce_repeatedly(
                                str(server.bootstrap), topic, batch, requests
                            )
                            used = (server.cpu_seconds() or 0.0) - before
                            cpu[label].append(used / requests)
                            rate[label].append(data_bytes * requests / seconds)
                    for label in labels:
                        print(f"{shape:<12} {codec.name:<7} {label:<16} "
                              f"{Figures(cpu[label]).text('us CPU/request', 1e-6)}")
                        print(f"{'':<12} {'':<7} {'':<16} {Figures(rate[label]).text('MB/s', 1e6)}")
                    cost = statistics.median(cpu["validate_batch"]) / statistics.median(
                        cpu["current"]
                    ) - 1
                    speed = statistics.median(rate["validate_batch"]) / statistics.median(
                        rate["current"]
                    )
                    summary.append((shape, codec.name, count if value_size else 0, cost, speed))
    print("\nshape        codec   server CPU per request  median throughput (budget: 15%)")
    for shape, codec_name, _, cost, speed in summary:
        print(f"{shape:<12} {codec_name:<7} {cost:+21.1%}  {speed:.1%} of current")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.validate_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="repetitions of each figure (>= 3)")
    parser.add_argument("--min-time", type=float, default=0.3,
                        help="seconds each in-process figure is averaged over")
    parser.add_argument("--codecs", default="none,gzip,snappy,lz4,zstd",
                        help="comma-separated codecs for the in-process part")
    parser.add_argument("--requests", type=int, default=300,
                        help="produce requests per end-to-end run")
    parser.add_argument("--server-codecs", default="none,lz4,zstd",
                        help="comma-separated codecs for the end-to-end part")
    parser.add_argument("--no-server", action="store_true", help="skip the end-to-end part")
    args = parser.parse_args(argv)
    if args.runs < 3:
        parser.error("--runs must be at least 3")
    codecs = [Compression[name.strip().upper()] for name in args.codecs.split(",")]
    bench_in_process(args.runs, args.min_time, codecs)
    if not args.no_server:
        server_codecs = [Compression[name.strip().upper()] for name in args.server_codecs.split(",")]
        bench_end_to_end(args.runs, args.requests, server_codecs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
