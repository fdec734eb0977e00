"""The fault run's short form (tests/helpers/faultrun; the long form is
``python -m benchmarks.fault_run``): a 3-broker cluster and its etcd, each in a network
namespace of its own, under idempotent acks=all producers (confluent-kafka and
kafka-python), a transactional producer whose offsets go to a group coordinated by
another broker, and a group committing continuously; one seeded fault of each kind
(kill -9 and SIGSTOP of a partition leader or a coordinator, a network partition of one
broker, etcd killed and paused), the cluster whole again after each; then the checker
over the whole history: nothing acknowledged lost or duplicated, order per partition,
read_committed all-or-nothing, committed offsets never back, no stale end offset.

The seed is fixed (the run repeats itself) unless FAULTRUN_SEED gives another; it and
the counts per fault are printed and recorded (junit properties). Needs root (network
namespaces): without it the test fails, it does not skip.
"""

from __future__ import annotations

import os

import pytest
from helpers.faultrun.run import run

# alone: beside three workers running other clusters, a broker starved for seconds kept
# the cluster from getting whole again within 120 s after a fault (load, not a lost record).
pytestmark = [pytest.mark.slow, pytest.mark.alone, pytest.mark.timeout(900)]

KINDS = ["kill9", "sigstop", "partition", "etcd-kill", "etcd-pause"]


def test_fault_run_keeps_every_property(tmp_path, record_property):
    seed = int(os.environ.get("FAULTRUN_SEED", "2111"))
    report = run(tmp_path, seed, faults=len(KINDS), kinds=KINDS, netns=True)
    print(report.table())
    record_property("seed", seed)
    for kind, count, _, _, _ in report.per_fault():
        record_property(f"faults.{kind}", count)
    assert sorted(d.step.kind for d in report.steps) == sorted(KINDS), report.table()
    history = report.history
    assert history.acks and history.txns and history.offset_reads and history.end_reads, \
        report.table()  # every workload did its part
    if not report.ok:
        report.history.save(tmp_path / "history.json")
    assert report.ok, f"{report.table()}\nhistory: {tmp_path / 'history.json'}"
