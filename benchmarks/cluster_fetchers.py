"""Replica fetching with many partitions, two source trees back to back:
``python -m benchmarks.cluster_fetchers --before DIR [--after DIR]``.

Made for the change to one replica fetcher per source broker (Kafka's
ReplicaFetcherThread) from one per partition: three brokers on etcd (from the tree
being measured), one topic of ``--partitions`` partitions (default 30) with three
replicas, so each broker follows two thirds of them. Per run, on a fresh cluster:

- ``idle CPU``: CPU seconds the three broker processes use over ``--idle-s`` seconds
  with nothing produced (the cost of followers polling their leaders);
- ``acks=all``: records/s of one confluent-kafka producer writing ``--records`` 1 KiB
  records round-robin over the partitions with acks=all (``min.insync.replicas=2``).

Trees alternate in order (before/after, after/before, ...), ``--repeats`` runs each
(default 3); prints min/median/max and the ratio of medians. ``--before`` is a plain
copy of the older tree (e.g. ``git archive COMMIT | tar -x -C DIR``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
VALUE = b"x" * 1024


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(partitions: int, records: int, idle_s: float) -> dict[str, float]:
    """One fresh cluster from the tree on PYTHONPATH; its two figures."""
    sys.path.insert(0, str(HERE.parent.parent / "tests"))
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic
    from helpers.clusterprocs import Cluster, EtcdProcess
    from helpers.waiting import wait_until

    with tempfile.TemporaryDirectory(prefix="cluster-fetchers-") as tmp:
        root = Path(tmp)
        etcd = EtcdProcess(root / "etcd-data")
        cluster = Cluster(root / "cluster", etcd, 3, **{"min.insync.replicas": 2})
        try:
            etcd.start()
            cluster.start()
            admin = cluster.admin()
            admin.create_topics([NewTopic("fan", partitions, 3)])["fan"].result(timeout=60)
            wait_until(lambda: all((p := cluster.partition("fan", i)) is not None
                                   and len(p.isrs) == 3 for i in range(partitions)), 120,
                       "every partition in sync")
            pids = [b.proc.pid for b in cluster.brokers.values() if b.proc is not None]
            before = sum(_cpu_seconds(pid) for pid in pids)
            time.sleep(idle_s)  # the measurement itself: nothing happens meanwhile
            idle = sum(_cpu_seconds(pid) for pid in pids) - before
            producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                 "linger.ms": 5, "enable.idempotence": False,
                                 "queue.buffering.max.messages": 200000})
            producer.produce("fan", value=b"warm-up")
            producer.flush(30)
            start = time.perf_counter()
            for i in range(records):
                while True:
                    try:
                        producer.produce("fan", value=VALUE, partition=i % partitions)
                        break
                    except BufferError:
                        producer.poll(0.01)
            if producer.flush(180):
                raise RuntimeError("records not delivered")
            rate = records / (time.perf_counter() - start)
        finally:
            cluster.stop()
            etcd.stop()
    return {"idle_cpu_s": idle, "acks_all_rps": rate}


def _run_tree(tree: Path, args: argparse.Namespace) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run(
        [sys.executable, str(HERE), "--one", "--partitions", str(args.partitions),
         "--records", str(args.records), "--idle-s", str(args.idle_s)],
        env=env, cwd=tree, check=True, capture_output=True, text=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(HERE.parent.parent))
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cluster_fetchers",
                                     description=__doc__)
    parser.add_argument("--before", type=Path, help="the older source tree")
    parser.add_argument("--after", type=Path, default=HERE.parent.parent,
                        help="the newer source tree (default: this one)")
    parser.add_argument("--partitions", type=int, default=30)
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--idle-s", type=float, default=5.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one_run(args.partitions, args.records, args.idle_s)))
        return 0
    if args.before is None:
        parser.error("--before DIR is required")
    from benchmarks.stats import Spread

    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    results: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for repeat in range(args.repeats):
        order = ["before", "after"] if repeat % 2 == 0 else ["after", "before"]
        for name in order:
            run = _run_tree(trees[name], args)
            results[name].append(run)
            print(f"run {repeat + 1} {name}: idle CPU {run['idle_cpu_s']:.2f} s over "
                  f"{args.idle_s:.0f} s, acks=all {run['acks_all_rps']:,.0f} records/s", flush=True)
    print(f"{args.partitions} partitions x 3 replicas on 3 brokers, {args.repeats} runs each:")
    medians: dict[tuple[str, str], float] = {}
    for metric, unit in (("idle_cpu_s", "CPU s"), ("acks_all_rps", "records/s")):
        for name in ("before", "after"):
            spread = Spread.of([r[metric] for r in results[name]])
            medians[(metric, name)] = spread.median
            print(f"  {metric:13} {name:6} median {spread.median:10,.2f} "
                  f"[{spread.low:,.2f}-{spread.high:,.2f}] {unit}")
        ratio = medians[(metric, "after")] / medians[(metric, "before")]
        print(f"  {metric:13} after / before: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
