"""Produce validation's cost with a real client compressing: ``python -m benchmarks.validate_clients``.

The suite's produce workload (``produce-1KiB-p1-acks1``: one librdkafka producer, 1 KiB
records, 1 MB batches, ``linger.ms`` 5, acks=1) with ``compression.type`` set, against
two servers, each fresh per run, back to back in alternating order, ``--runs`` rounds:

- ``no-validation``: benchmark-only launcher whose produce check is the header and CRC
  alone (what the server did before issue 11; never a server setting);
- ``validated``: logserver as shipped (every batch inflated under the cap and walked;
  zstd batches of 64 KiB or more on the validation thread).

Values are 1 KiB of hex text from a pool of 2,000 (about 2:1 compressible, no repeats
inside one batch), so the codecs do real work on both sides. Figures: MB/s of record
values acknowledged in the measured window, and the server's CPU per MB.

    python -m benchmarks.validate_clients --runs 3 --seconds 5 --codecs none,lz4,zstd
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .stats import Spread, compare, spread_text
from .targets import LogserverTarget
from .validate_offload import UnvalidatedLogserver

TOPIC = "validate-clients"
VALUE_BYTES = 1024
POOL = 2_000
WARMUP_S = 1.0
VARIANTS = ("no-validation", "validated")


def _tuning(codec: str) -> dict[str, object]:
    """The suite's produce tuning (benchmarks.workloads._producer_tuning) plus a codec."""
    return {
        "acks": "1",
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "batch.num.messages": 100_000,
        "queue.buffering.max.messages": 500_000,
        "queue.buffering.max.kbytes": 128 * 1024,
        "compression.type": codec,
        "enable.idempotence": False,
    }


def produce_window(bootstrap: str, codec: str, seconds: float,
                   server: LogserverTarget) -> tuple[float, float]:
    """(MB/s of values acknowledged, server CPU ms per MB) over one measured window."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(timeout=60)
    del admin
    failures: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            failures.append(err)

    producer = Producer({"bootstrap.servers": bootstrap, **_tuning(codec),
                         "delivery.report.only.error": True, "on_delivery": on_delivery})
    producer.list_topics(TOPIC, timeout=10)
    values = [os.urandom(VALUE_BYTES // 2).hex().encode() for _ in range(POOL)]
    sent = 0

    def send_until(deadline: float) -> None:
        nonlocal sent
        while time.perf_counter() < deadline:
            for _ in range(1_000):
                value = values[sent % POOL]
                while True:
                    try:
                        producer.produce(TOPIC, value)
                        break
                    except BufferError:
                        producer.poll(0.005)
                sent += 1
            producer.poll(0)

    send_until(time.perf_counter() + WARMUP_S)
    producer.flush(30)
    cpu_start = server.cpu_seconds() or 0.0
    start, first = time.perf_counter(), sent
    send_until(start + seconds)
    left = producer.flush(60)
    elapsed = time.perf_counter() - start
    cpu = (server.cpu_seconds() or 0.0) - cpu_start
    if failures or left:
        raise RuntimeError(f"{len(failures)} failed deliveries, {left} left: "
                           f"{failures[:1]}")
    mbytes = (sent - first) * VALUE_BYTES / 1e6
    return mbytes / elapsed, cpu * 1e3 / mbytes


def one_run(variant: str, codec: str, seconds: float) -> tuple[float, float]:
    cls = UnvalidatedLogserver if variant == "no-validation" else LogserverTarget
    with tempfile.TemporaryDirectory(prefix="validate-clients-") as tmp, \
            cls(Path(tmp)) as server:
        assert server.bootstrap is not None
        return produce_window(server.bootstrap, codec, seconds, server)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--codecs", default="none,lz4,zstd")
    args = parser.parse_args(argv)
    codecs = [c.strip() for c in args.codecs.split(",")]
    figures: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for codec in codecs:
        for run in range(args.runs):
            for variant in VARIANTS if run % 2 == 0 else VARIANTS[::-1]:
                result = one_run(variant, codec, args.seconds)
                figures.setdefault((codec, variant), []).append(result)
                print(f"{codec:5s} run {run + 1} {variant:13s}: {result[0]:6.1f} MB/s, "
                      f"server {result[1]:5.2f} ms CPU/MB", flush=True)
    print(f"\n1 producer, 1 KiB records, {args.seconds:.0f} s windows, {args.runs} runs "
          "(median [min-max]):")
    for codec in codecs:
        spreads = {v: [Spread.of([r[i] for r in figures[(codec, v)]]) for i in range(2)]
                   for v in VARIANTS}
        for variant in VARIANTS:
            rate, cpu = spreads[variant]
            print(f"  {codec:5s} {variant:13s} {spread_text(rate, 1, 'MB/s')}; server "
                  f"{spread_text(cpu, 2, 'ms CPU/MB')}")
        verdict = compare(spreads["validated"][0], spreads["no-validation"][0],
                          higher_is_better=True)
        print(f"  {codec:5s} validated vs no-validation, throughput: "
              f"{verdict.text() if verdict else 'no ratio'} (budget: >= 0.85x)")


if __name__ == "__main__":
    main()
