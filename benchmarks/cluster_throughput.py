"""Cluster produce throughput: ``python -m benchmarks.cluster_throughput``.

Back to back, alternating order, ``--repeats`` times (default 3), 1 KiB records from one
confluent-kafka producer, each run on a fresh topic:

- ``single acks=1``: one broker, no cluster, one partition;
- ``RF3 acks=all``: three brokers on etcd, one partition replicated three times,
  ``min.insync.replicas=2`` (the price of replication);
- ``single, 3 partitions`` vs ``3 brokers, 3 partitions`` (RF 1, acks=1): the same
  work on one process or spread over three, the multi-core scaling figure.

Prints min/median/max records per second and the ratios of medians.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from itertools import count
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from helpers.clusterprocs import Cluster, EtcdProcess  # noqa: E402
from helpers.serverproc import ServerProcess  # noqa: E402

from benchmarks.stats import Spread  # noqa: E402

VALUE = b"x" * 1024
_topics = count()


def produce_rate(bootstrap: str, records: int, partitions: int, rf: int, acks: str) -> float:
    topic = f"bench-{next(_topics)}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, rf)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                         "enable.idempotence": False, "queue.buffering.max.messages": 200000})
    producer.produce(topic, value=b"warm-up")  # metadata and connections before the clock
    producer.flush(30)
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=VALUE, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - start
    if remaining:
        raise RuntimeError(f"{remaining} records not delivered")
    return records / elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cluster_throughput", description=__doc__)
    parser.add_argument("--records", type=int, default=30000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="cluster-throughput-") as tmp:
        root = Path(tmp)
        single = ServerProcess(root / "single" / "data")
        etcd = EtcdProcess(root / "etcd-data")
        cluster = Cluster(root / "cluster", etcd, 3, **{"min.insync.replicas": 2})
        try:
            single.start()
            etcd.start()
            cluster.start()
            runs = {
                "single acks=1": lambda: produce_rate(single.bootstrap, args.records, 1, 1, "1"),
                "RF3 acks=all": lambda: produce_rate(cluster.bootstrap, args.records, 1, 3, "all"),
                "single, 3 partitions": lambda: produce_rate(single.bootstrap, args.records, 3, 1, "1"),
                "3 brokers, 3 partitions": lambda: produce_rate(cluster.bootstrap, args.records, 3, 1, "1"),
            }
            for repeat in range(args.repeats):
                order = list(runs) if repeat % 2 == 0 else list(reversed(runs))
                for name in order:
                    rate = runs[name]()
                    results.setdefault(name, []).append(rate)
                    print(f"run {repeat + 1} {name}: {rate:,.0f} records/s", flush=True)
        finally:
            cluster.stop()
            etcd.stop()
            single.stop()
    spreads = {name: Spread.of(values) for name, values in results.items()}
    print(f"produce, 1 KiB records, {args.records} per run, {args.repeats} runs each (records/s):")
    for name, spread in spreads.items():
        print(f"  {name:26} median {spread.median:10,.0f} [{spread.low:,.0f}-{spread.high:,.0f}]")
    print(f"  RF3 acks=all / single acks=1: "
          f"{spreads['RF3 acks=all'].median / spreads['single acks=1'].median:.2f}x")
    print(f"  3 brokers / single, 3 partitions: "
          f"{spreads['3 brokers, 3 partitions'].median / spreads['single, 3 partitions'].median:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
