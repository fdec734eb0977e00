"""What a SIGTERM'd leader costs its producers, with and without controlled shutdown:
``python -m benchmarks.cluster_shutdown``.

Per run, on a fresh three-broker cluster (``controlled.shutdown.enable`` true or
false for all three): one idempotent acks=all confluent-kafka producer writes to a
topic of one partition with three replicas (``min.insync.replicas=2``); the leader is
stopped with SIGTERM; the figure is the longest pause between two acknowledgements
around the stop (the unavailability the producer saw). Settings alternate in order,
``--repeats`` runs each (default 3); prints min/median/max and the ratio of medians.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402
from helpers.clusterprocs import Cluster, EtcdProcess  # noqa: E402
from helpers.waiting import wait_until  # noqa: E402

from benchmarks.stats import Spread  # noqa: E402


def longest_pause(controlled: bool) -> float:
    """Seconds of the longest pause between acknowledgements around a leader's SIGTERM."""
    with tempfile.TemporaryDirectory(prefix="cluster-shutdown-") as tmp:
        root = Path(tmp)
        etcd = EtcdProcess(root / "etcd-data")
        cluster = Cluster(root / "cluster", etcd, 3, **{
            "min.insync.replicas": 2, "controlled.shutdown.enable": str(controlled).lower()})
        acks: list[float] = []
        stop = threading.Event()

        def produce() -> None:
            producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                 "enable.idempotence": True, "linger.ms": 1})
            while not stop.is_set():
                producer.produce("stop", value=b"x" * 100, partition=0,
                                 on_delivery=lambda err, _: err is None and acks.append(time.monotonic()))
                producer.poll(0.002)
            producer.flush(60)

        try:
            etcd.start()
            cluster.start()
            admin = cluster.admin()  # kept alive until its future is done
            admin.create_topics([NewTopic("stop", 1, 3)])["stop"].result(timeout=30)
            wait_until(lambda: (p := cluster.partition("stop", 0)) is not None and len(p.isrs) == 3,
                       60, "the partition in sync")
            thread = threading.Thread(target=produce, daemon=True)
            thread.start()
            wait_until(lambda: len(acks) > 200, 60, "records acknowledged")
            leader = cluster.partition("stop", 0).leader
            stopped_at = time.monotonic()
            cluster.brokers[leader].stop()
            count = len(acks)
            wait_until(lambda: len(acks) > count + 200, 60, "records acknowledged after the stop")
            stop.set()
            thread.join(60)
        finally:
            stop.set()
            cluster.stop()
            etcd.stop()
    around = [t for t in acks if t >= stopped_at - 1]
    return max(b - a for a, b in zip(around, around[1:], strict=False))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cluster_shutdown", description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    results: dict[bool, list[float]] = {True: [], False: []}
    for repeat in range(args.repeats):
        for controlled in ([False, True] if repeat % 2 == 0 else [True, False]):
            pause = longest_pause(controlled)
            results[controlled].append(pause)
            print(f"run {repeat + 1} controlled.shutdown.enable={str(controlled).lower()}: "
                  f"longest pause {pause * 1000:.0f} ms", flush=True)
    spreads = {c: Spread.of(v) for c, v in results.items()}
    print(f"longest pause between acks=all acknowledgements around a leader's SIGTERM, "
          f"{args.repeats} runs each (ms):")
    for controlled in (False, True):
        s = spreads[controlled]
        print(f"  controlled.shutdown.enable={str(controlled).lower():5} median "
              f"{s.median * 1000:6.0f} [{s.low * 1000:.0f}-{s.high * 1000:.0f}]")
    print(f"  with / without: {spreads[True].median / spreads[False].median:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
