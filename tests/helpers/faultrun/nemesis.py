"""Carries out a planned fault (``schedule.Step``) on a running cluster, then waits until
the cluster is whole again: every broker registered, every watched partition with all
its replicas in sync. What it did, to whom and how long recovery took is returned."""

from __future__ import annotations

import logging
import os
import random
import signal
import time
from dataclasses import dataclass

from helpers.clusterprocs import Cluster, EtcdProcess
from helpers.waiting import wait_until
from logserver.groups.store import kafka_partition_for

from .schedule import Step

log = logging.getLogger(__name__)

OFFSETS, TXN_STATE = "__consumer_offsets", "__transaction_state"
#: partitions of both internal topics in the run (Kafka's 50 would only slow every broker
#: start; 6 still spreads the coordinators over the three brokers)
INTERNAL_PARTITIONS = 6


@dataclass(frozen=True)
class Done:
    step: Step
    target: str  # "broker 2", "etcd", "brokers 1,2,3"
    recovery_s: float  # from the fault's end until the cluster was whole again
    began: float  # time.monotonic() when the fault began, for reading a history against
    ended: float  # when the cluster was whole again


class Nemesis:
    def __init__(self, cluster: Cluster, etcd: EtcdProcess, lab: object | None,
                 topics: dict[str, int], groups: list[str], txn_id: str) -> None:
        """``topics``: topic -> partitions, watched for a leader and a full ISR;
        ``lab``: a tests/helpers/netns.py NetLab holding the brokers (None: no partitions)."""
        self.cluster, self.etcd, self.lab = cluster, etcd, lab
        self.topics, self.groups, self.txn_id = topics, groups, txn_id

    # -- roles ------------------------------------------------------------------------
    def resolve(self, step: Step) -> list[int]:
        """The broker(s) the step's role names now (a random one if it names none)."""
        nodes = sorted(self.cluster.brokers)
        rng = random.Random(step.pick)
        leader = None
        if step.role == "all-brokers":
            return nodes
        if step.role == "leader":
            topic = rng.choice(sorted(self.topics))
            leader = self._leader(topic, rng.randrange(self.topics[topic]))
        elif step.role == "group-coordinator":
            group = rng.choice(self.groups)
            leader = self._leader(OFFSETS, kafka_partition_for(group, INTERNAL_PARTITIONS))
        elif step.role == "txn-coordinator":
            leader = self._leader(TXN_STATE, kafka_partition_for(self.txn_id, INTERNAL_PARTITIONS))
        return [leader if leader in nodes else rng.choice(nodes)]

    def _leader(self, topic: str, partition: int) -> int | None:
        try:
            part = self.cluster.partition(topic, partition)
        except Exception:  # metadata unavailable for a moment: a random broker then
            return None
        return None if part is None else int(part.leader)

    # -- faults -----------------------------------------------------------------------
    def run(self, step: Step) -> Done:
        began = time.monotonic()
        if step.kind in ("etcd-kill", "etcd-pause"):
            target = "etcd"
            self._etcd(step)
        else:
            nodes = self.resolve(step)
            target = ("broker " if len(nodes) == 1 else "brokers ") + ",".join(map(str, nodes))
            log.info("%s on %s", step, target)
            getattr(self, "_" + step.kind.replace("-", "_"))(nodes, step.hold_s)
        started = time.monotonic()
        self.wait_whole()
        ended = time.monotonic()
        return Done(step, target, ended - started, began, ended)

    def _kill9(self, nodes: list[int], hold: float) -> None:
        broker = self.cluster.brokers[nodes[0]]
        broker.kill9()
        time.sleep(hold)  # the fault's length (drawn by the schedule), not a wait
        broker.start()

    def _sigstop(self, nodes: list[int], hold: float) -> None:
        self.cluster.pause(nodes[0])
        try:
            time.sleep(hold)
        finally:
            self.cluster.resume(nodes[0])

    def _partition(self, nodes: list[int], hold: float) -> None:
        if self.lab is None:
            raise RuntimeError("a network partition needs the brokers in network namespaces")
        host = f"node{nodes[0]}"
        self.lab.cut(host)  # type: ignore[attr-defined]
        self.cluster.paused.add(nodes[0])  # out of the bootstrap list meanwhile
        try:
            time.sleep(hold)
        finally:
            self.lab.heal(host)  # type: ignore[attr-defined]
            self.cluster.paused.discard(nodes[0])

    def _rolling_restart(self, nodes: list[int], _hold: float) -> None:
        for node in nodes:  # SIGTERM: a controlled shutdown, then back
            broker = self.cluster.brokers[node]
            broker.stop()
            self.cluster.wait_for_brokers(set(self.cluster.brokers) - {node}, timeout=90)
            broker.start()
            self.wait_whole()

    def _etcd(self, step: Step) -> None:
        log.info("%s", step)
        if step.kind == "etcd-kill":
            self.etcd.kill9()
            time.sleep(step.hold_s)
            self.etcd.start()
            return
        pid = self.etcd.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(step.hold_s)
        finally:
            os.kill(pid, signal.SIGCONT)

    # -- recovery ---------------------------------------------------------------------
    def whole(self) -> bool:
        try:
            meta = self.cluster.metadata()
        except Exception:
            return False
        if set(meta.brokers) != set(self.cluster.brokers):
            return False
        for topic, count in self.topics.items():
            t = meta.topics.get(topic)
            if t is None or t.error is not None:
                return False
            for i in range(count):
                p = t.partitions.get(i)
                if p is None or p.leader < 0 or len(p.isrs) != len(self.cluster.brokers):
                    return False
        return True

    def wait_whole(self, timeout: float = 120) -> None:
        wait_until(self.whole, timeout, "every broker registered and every replica in sync")
