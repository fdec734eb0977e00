"""The fault run's short form (tests/helpers/faultrun; the long form is
``python -m benchmarks.fault_run``): a 3-broker cluster and its etcd, each in a network
namespace of its own, under idempotent acks=all producers (confluent-kafka and
kafka-python), a transactional producer whose offsets go to a group coordinated by
another broker, and a group committing continuously; one seeded fault of every kind
(kill -9 and SIGSTOP of a partition leader or a coordinator, a network partition of one
broker, etcd killed and paused, a rolling restart), the cluster whole again and every
workload progressing after each; then the checker over the whole history: nothing
acknowledged lost or duplicated, order per partition, read_committed all-or-nothing,
committed offsets never back, no stale end offset.

The seed is fixed (the run repeats its plan) unless FAULTRUN_SEED gives another; it and
the counts per fault are printed and recorded (junit properties). Needs root (network
namespaces): without it the test fails, it does not skip.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
from helpers.faultrun.checker import PROPERTIES, client_resends, summary
from helpers.faultrun.history import ABORTED, COMMITTED, parse_plain
from helpers.faultrun.run import COMMIT_GROUP, RunFailed, run
from helpers.faultrun.schedule import KINDS

# alone: beside three workers running clusters of their own, a broker starved for
# seconds slows every recovery; the run is judged by its history, not by its speed, but
# its wall time (about a minute) is better spent with nothing beside it.
pytestmark = [pytest.mark.slow, pytest.mark.alone, pytest.mark.timeout(900)]

SEED = 2111


def test_fault_run_keeps_every_property(tmp_path, record_property):
    seed = int(os.environ.get("FAULTRUN_SEED", str(SEED)))
    kinds = list(KINDS)  # one of each: the plan covers every kind first
    try:
        report = run(tmp_path, seed, faults=len(kinds), kinds=kinds, netns=True)
    except RunFailed as exc:  # a workload stalled or crashed: keep what it had seen
        exc.report.history.save(tmp_path / "history.json")
        print(exc.report.client_errors)
        raise
    table = f"{report.table()}\n{report.timeline()}"
    print(table)
    for name, errors in report.client_errors.items():  # retried or counted, never a property
        print(f"  {name}: {dict(errors.most_common(8))}")
    record_property("seed", seed)
    # librdkafka's re-sends after an epoch bump (checker.client_resends): counted, allowed
    record_property("client_resends", len(client_resends(report.history)))
    for kind, count, _, _, _ in report.per_fault():
        record_property(f"faults.{kind}", count)
    if not report.ok:
        report.history.save(tmp_path / "history.json")

    done = Counter(d.step.kind for d in report.steps)
    assert {kind: done[kind] for kind in kinds} == dict.fromkeys(kinds, 1), table

    h = report.history
    acked_by = Counter(parse_plain(a.value)[0] for a in h.acks)
    outcomes = Counter(t.outcome for t in h.txns)
    assert acked_by["ck"] > 0 and acked_by["kp"] > 0, table  # both idempotent producers
    assert outcomes[COMMITTED] > 0 and outcomes[ABORTED] > 0, table  # transactions both ways
    assert any(c.group == COMMIT_GROUP for c in h.commits), table  # the committing group
    assert any(c.group == h.txn_group for c in h.commits), table  # offsets sent in transactions
    assert h.offset_reads and h.end_reads, table  # the observer
    assert h.committed_log and any(h.committed_log.values()), table

    verdict = summary(report.violations)
    assert set(verdict) == set(PROPERTIES)
    assert verdict == dict.fromkeys(PROPERTIES, 0), \
        f"{table}\nhistory: {tmp_path / 'history.json'}"
