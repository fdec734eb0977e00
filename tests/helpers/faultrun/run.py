"""One fault run end to end: cluster up, workloads on, the nemesis's steps one after the
other, workloads off, the topics read in full, the checker's verdict.

Shared by tests/cluster/test_faultrun.py (one fault of each kind, in the suite) and
``python -m benchmarks.fault_run`` (minutes of them). Every process started here is stopped here, by its pid, also when the
run fails; namespaces (``netns=True``, needs root) carry this process's pid in their
names, so parallel runs do not collide.
"""

from __future__ import annotations

import contextlib
import logging
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from helpers.clusterprocs import Cluster, EtcdProcess
from helpers.waiting import wait_until
from logserver.groups.store import kafka_partition_for

from .batches import read_writers
from .checker import Violation, check, client_resends, summary
from .history import History
from .nemesis import INTERNAL_PARTITIONS, OFFSETS, TXN_STATE, Done, Nemesis
from .schedule import KINDS, NEEDS_NETNS, Step, plan
from .workloads import CommittingConsumer, Observer, PlainProducer, TxnProducer, Worker, read_all

log = logging.getLogger(__name__)

PLAIN, TXN = "fr-plain", "fr-txn"
PARTITIONS = 3
COMMIT_GROUP = "fr-commits"
SETTINGS = {"min.insync.replicas": 2, "default.replication.factor": 3,
            "replica.lag.time.max.ms": 5000,
            "offsets.topic.num.partitions": INTERNAL_PARTITIONS,
            "transaction.state.log.num.partitions": INTERNAL_PARTITIONS}


@dataclass
class Report:
    seed: int
    steps: list[Done] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    history: History = field(default_factory=History)
    client_errors: dict[str, Counter[str]] = field(default_factory=dict)
    #: per step: seconds from the cluster whole again until every workload progressed
    progress_s: list[float] = field(default_factory=list)
    started: float = 0.0  # time.monotonic() at the run's start
    elapsed_s: float = 0.0
    setup_s: float = 0.0  # cluster, topics and workloads up
    check_s: float = 0.0  # workloads stopped, final reads

    @property
    def ok(self) -> bool:
        return not self.violations

    def per_fault(self) -> list[tuple[str, int, str, float, float]]:
        """(fault kind, count, roles hit, median recovery s, max recovery s) per kind."""
        rows = []
        for kind in sorted({d.step.kind for d in self.steps}):
            done = [d for d in self.steps if d.step.kind == kind]
            roles = Counter(d.step.role for d in done)
            times = [d.recovery_s for d in done]
            rows.append((kind, len(done), ", ".join(f"{r} x{n}" for r, n in sorted(roles.items())),
                         statistics.median(times), max(times)))
        return rows

    def table(self) -> str:
        h = self.history
        lines = [f"seed {self.seed}: {len(self.steps)} faults in {self.elapsed_s:.0f} s (set-up "
                 f"{self.setup_s:.0f} s, final reads {self.check_s:.0f} s)",
                 f"{'fault':<16} {'count':>5}  {'recovery s (median/max)':>23}  targets"]
        for kind, count, roles, median, worst in self.per_fault():
            lines.append(f"{kind:<16} {count:>5}  {median:>11.1f} / {worst:<9.1f}  {roles}")
        transactions = Counter(t.outcome for t in h.txns)
        lines.append(f"history: {len(h.acks)} acknowledged records, transactions "
                     f"{dict(sorted(transactions.items()))}, {len(h.commits)} acknowledged "
                     f"commits, {len(h.offset_reads)} offset reads, {len(h.end_reads)} end reads")
        verdict = summary(self.violations)
        lines.append("checker: " + ("OK" if self.ok else "FAILED") + " "
                     + ", ".join(f"{p}={n}" for p, n in verdict.items()))
        lines += [f"  {v}" for v in self.violations[:20]]
        resent = client_resends(h)
        lines.append(f"re-sent by the client under a new producer epoch (librdkafka's epoch "
                     f"bump, no violation): {len(resent)}")
        lines += [f"  {v!r} at " + ", ".join(f"{p}@{o} (producer {w[0]} epoch {w[1]} seq {w[2]})"
                                            for p, o, w in copies)
                  for v, copies in list(resent.items())[:10]]
        return "\n".join(lines)

    def timeline(self) -> str:
        """One line per fault: when it began (s into the run), on whom, how long the
        cluster took to be whole again and then the workloads to progress."""
        lines = []
        for i, d in enumerate(self.steps):
            progress = f"{self.progress_s[i]:.1f}" if i < len(self.progress_s) else "-"
            lines.append(f"  {d.began - self.started:6.1f} s  {d.step} on {d.target}: "
                         f"{d.ended - d.began:.1f} s to whole, workloads {progress} s after")
        return "\n".join(lines)


class RunFailed(AssertionError):
    """The run stopped before its checker (a workload stalled or crashed): the report so
    far (steps, history, client errors) goes with it, to read the failure against."""

    def __init__(self, message: str, report: Report) -> None:
        super().__init__(message)
        self.report = report


@contextlib.contextmanager
def _cluster(root: Path, netns: bool) -> Iterator[tuple[Cluster, EtcdProcess, object | None]]:
    lab = None
    with contextlib.ExitStack() as stack:
        if netns:
            from helpers.netns import netlab
            lab = stack.enter_context(netlab(["etcd", "node1", "node2", "node3"]))
            etcd = EtcdProcess(root / "etcd-data", netns=lab.namespaces["etcd"],
                               host=lab.addresses["etcd"])
            hosts = {n: (lab.namespaces[f"node{n}"], lab.addresses[f"node{n}"]) for n in (1, 2, 3)}
        else:
            etcd, hosts = EtcdProcess(root / "etcd-data"), None
        etcd.start()
        stack.callback(etcd.stop)
        cluster = Cluster(root, etcd, 3, hosts=hosts, **SETTINGS)
        stack.callback(cluster.stop)
        if lab is not None:
            stack.callback(_heal_all, lab)  # before the brokers stop: nothing left cut off
        for broker in cluster.brokers.values():  # all at once: each start is seconds
            broker.start(wait=False)
        for broker in cluster.brokers.values():
            broker.wait_ready()
        cluster.wait_for_brokers(set(cluster.brokers))
        yield cluster, etcd, lab


def _heal_all(lab: object) -> None:
    for name in lab.ports:  # type: ignore[attr-defined]
        with contextlib.suppress(RuntimeError):
            lab.heal(name)  # type: ignore[attr-defined]


def _setup(cluster: Cluster) -> tuple[str, str]:
    """Create the topics and the internal ones; a transactional id and a group whose
    coordinators are two different brokers (as chosen now: the faults move them)."""
    admin = cluster.admin()
    futures = admin.create_topics([NewTopic(t, PARTITIONS, 3) for t in (PLAIN, TXN)])
    for future in futures.values():
        future.result(timeout=30)
    probe = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "fr-probe"})
    probe.init_transactions(60)  # creates __transaction_state
    starter = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": COMMIT_GROUP})
    try:  # creates __consumer_offsets
        wait_until(lambda: _committed_or_none(starter) is not None, 60, "a group coordinator")
    finally:
        starter.close()

    def leaders(topic: str) -> dict[int, int]:
        t = cluster.metadata().topics.get(topic)
        if t is None or t.error is not None:
            return {}
        return {i: p.leader for i, p in t.partitions.items() if p.leader > 0 and len(p.isrs) == 3}

    txn_leaders = wait_until(lambda: len(leaders(TXN_STATE)) == INTERNAL_PARTITIONS
                             and leaders(TXN_STATE), 60, f"{TXN_STATE} in sync")
    txn_id = "fr-txn-0"
    coordinator = txn_leaders[kafka_partition_for(txn_id, INTERNAL_PARTITIONS)]
    offsets = wait_until(lambda: len(leaders(OFFSETS)) == INTERNAL_PARTITIONS and leaders(OFFSETS),
                         60, f"{OFFSETS} in sync")
    group = next(g for g in (f"fr-txn-group-{i}" for i in range(500))
                 if offsets[kafka_partition_for(g, INTERNAL_PARTITIONS)] != coordinator)
    log.info("transactional id %s coordinated by broker %d, its group %s by broker %d",
             txn_id, coordinator, group, offsets[kafka_partition_for(group, INTERNAL_PARTITIONS)])
    return txn_id, group


def _writers(cluster: Cluster, log: dict[int, list[tuple[int, bytes]]]) -> dict[int, dict[int, tuple[int, int, int]]]:
    """Producer id, epoch and sequence of every record read, from each partition's leader."""
    meta = cluster.metadata()
    out = {}
    for partition, records in log.items():
        leader = meta.brokers[meta.topics[PLAIN].partitions[partition].leader]
        end = records[-1][0] + 1 if records else 0
        out[partition] = read_writers(leader.host, leader.port, PLAIN, partition, end)
    return out


def _committed_or_none(consumer: Consumer) -> list | None:
    try:
        return consumer.committed([TopicPartition(PLAIN, 0)], timeout=5)
    except KafkaException:
        return None


def _progress(workers: list[Worker], timeout: float = 120) -> None:
    """Every worker made progress (an acknowledgement, a commit, a read) since now."""
    before = {w.name: w.progress for w in workers}
    errors = {w.name: Counter(w.errors) for w in workers}
    try:
        wait_until(lambda: all(w.progress > before[w.name] for w in workers) or
                   any(w.crashed for w in workers), timeout,
                   "every workload to make progress")
    except AssertionError as exc:  # which one stalled, and what it was told meanwhile
        stalled = {w.name: dict((w.errors - errors[w.name]).most_common(5))
                   for w in workers if w.progress <= before[w.name]}
        raise AssertionError(f"{exc}; no progress (errors since): {stalled}") from None
    crashed = [(w.name, w.crashed) for w in workers if w.crashed]
    if crashed:
        raise AssertionError(f"workload crashed: {crashed}")


def run(root: Path, seed: int, *, faults: int | None = None, duration_s: float | None = None,
        kinds: list[str] | None = None, netns: bool = False,
        on_step: Callable[[Done], None] | None = None) -> Report:
    """Run the plan of ``seed``: ``faults`` steps, or as many as fit in ``duration_s``."""
    chosen = list(kinds or [k for k in KINDS if netns or k not in NEEDS_NETNS])
    if not netns and NEEDS_NETNS & set(chosen):
        raise ValueError(f"{sorted(NEEDS_NETNS & set(chosen))} need netns=True (root)")
    steps: list[Step] = plan(seed, faults if faults is not None else 10_000, chosen)
    report = Report(seed)
    started = report.started = time.monotonic()
    with _cluster(root, netns) as (cluster, etcd, lab):
        txn_id, txn_group = _setup(cluster)
        history = report.history
        history.txn_group = txn_group
        bootstrap = cluster.bootstrap
        workers: list[Worker] = [
            PlainProducer("ck", history, bootstrap, PLAIN, PARTITIONS),
            PlainProducer("kp", history, bootstrap, PLAIN, PARTITIONS, client="kafka-python"),
            TxnProducer(history, bootstrap, TXN, PARTITIONS, txn_id, txn_group,
                        TopicPartition(PLAIN, 0), seed),
            CommittingConsumer(history, bootstrap, PLAIN, COMMIT_GROUP),
            Observer(history, bootstrap, PLAIN, PARTITIONS,
                     {COMMIT_GROUP: [TopicPartition(PLAIN, p) for p in range(PARTITIONS)],
                      txn_group: [TopicPartition(PLAIN, 0)]}),
        ]
        nemesis = Nemesis(cluster, etcd, lab, {PLAIN: PARTITIONS, TXN: PARTITIONS},
                          [COMMIT_GROUP, txn_group], txn_id)
        try:
            for worker in workers:
                worker.start()
            _progress(workers)
            report.setup_s = time.monotonic() - started
            for step in steps:
                if duration_s is not None and time.monotonic() - started > duration_s:
                    break
                time.sleep(step.gap_s)  # the schedule's quiet time between faults
                done = nemesis.run(step)
                report.steps.append(done)
                if on_step is not None:
                    on_step(done)
                _progress(workers)
                report.progress_s.append(time.monotonic() - done.ended)
        except AssertionError as exc:
            raise RunFailed(f"{exc}\n{report.timeline()}", report) from exc
        finally:
            for worker in workers:
                worker.stop()
            report.client_errors = {w.name: w.errors for w in workers}
        crashed = [(w.name, w.crashed) for w in workers if w.crashed]
        if crashed:
            raise RunFailed(f"workload crashed: {crashed}", report)
        finishing = time.monotonic()
        nemesis.wait_whole()
        history.log = read_all(cluster.bootstrap, PLAIN, PARTITIONS, "read_uncommitted")
        history.writers = _writers(cluster, history.log)
        history.committed_log = read_all(cluster.bootstrap, TXN, PARTITIONS, "read_committed")
        report.check_s = time.monotonic() - finishing
    report.violations = check(history)
    report.elapsed_s = time.monotonic() - started
    return report
