"""How long a partition move takes with and without a replication throttle:
``python -m benchmarks.reassign_throttle``.

One fresh three-broker cluster; one topic of one partition, one replica, filled with
``--mib`` MiB of 1 KiB records. The partition is moved to the next broker again and
again with ``logserver topic reassign ... --wait`` (which returns once the move is done),
alternately without a throttle and with ``--throttle`` at ``--rate`` bytes/s (order
alternating, ``--repeats`` each). Prints min/median/max seconds of the command, the
ratio, and the lower bound the throttle promises (size/rate - 1 s).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402
from helpers.clusterprocs import running_cluster  # noqa: E402
from helpers.waiting import wait_until  # noqa: E402

from benchmarks.stats import Spread  # noqa: E402

TOPIC = "moving"


def _fill(bootstrap: str, mib: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "batch.size": 65536})
    for i in range(mib * 1024):
        producer.produce(TOPIC, value=f"{i:08d}".encode().ljust(1024, b"x"), partition=0)
        producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("records left unacknowledged")


def _move(bootstrap: str, target: int, rate: int | None) -> float:
    throttle = [] if rate is None else ["--throttle", str(rate)]
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "logserver", "topic", "reassign",
                           f"{TOPIC}:0={target}", *throttle, "--wait", "-b", bootstrap],
                          capture_output=True, text=True, timeout=600)
    if done.returncode:
        raise RuntimeError(f"reassign failed ({done.returncode}): {done.stdout}{done.stderr}")
    return time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reassign_throttle",
                                     description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mib", type=int, default=8)
    parser.add_argument("--rate", type=int, default=2 << 20, help="bytes/s of the throttled moves")
    args = parser.parse_args(argv)
    results: dict[bool, list[float]] = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="reassign-throttle-") as tmp, \
            running_cluster(Path(tmp), 3) as cluster:
        admin = cluster.admin()  # kept alive until its future is done
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(timeout=30)
        wait_until(lambda: (p := cluster.partition(TOPIC, 0)) is not None and p.leader > 0, 60,
                   "the partition led")
        _fill(cluster.bootstrap, args.mib)
        size = sum(f.stat().st_size for n in (1, 2, 3)
                   for f in (cluster.brokers[n].segment_files(TOPIC, 0)
                             if cluster.brokers[n].partition_dir(TOPIC, 0).exists() else []))
        for repeat in range(args.repeats):
            for throttled in ([False, True] if repeat % 2 == 0 else [True, False]):
                holder = cluster.partition(TOPIC, 0).replicas[0]
                target = holder % 3 + 1
                seconds = _move(cluster.bootstrap, target, args.rate if throttled else None)
                results[throttled].append(seconds)
                print(f"run {repeat + 1} {'throttled' if throttled else 'unthrottled'}: "
                      f"{holder} -> {target} in {seconds:.2f} s", flush=True)
    spreads = {t: Spread.of(v) for t, v in results.items()}
    print(f"moving {size:,} bytes, {args.repeats} runs each (seconds of `reassign --wait`):")
    for throttled, label in ((False, "unthrottled"), (True, f"--throttle {args.rate}")):
        s = spreads[throttled]
        print(f"  {label:20} median {s.median:6.2f} [{s.low:.2f}-{s.high:.2f}]")
    print(f"  throttled / unthrottled: {spreads[True].median / spreads[False].median:.2f}x; "
          f"lower bound of the throttled move {size / args.rate - 1:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
