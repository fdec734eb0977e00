"""What one steady ConsumerGroupHeartbeat costs the KIP-848 state machine, by group size.

A steady heartbeat (no subscription change, nothing to reconcile) is what a consumer
group sends most: every member every ``group.consumer.heartbeat.interval.ms``. Its cost
must not grow with the group, or a large group would spend the event loop on
heartbeats alone. The machine (``logserver/groups/consumer``) is driven directly, no
sockets: N members join a topic of 2N partitions and reconcile until Stable, then every
member heartbeats ROUNDS times; a run's figure is the mean time per heartbeat. Printed:
median [min-max] of the runs per group size and the ratio of the largest group's
median to the smallest's (1.0: size does not matter). Also what the ``uniform``
assignor takes for a whole new target (N members, 2N partitions, nothing to keep) and
when one member joins a settled group (sticky): the work of a membership change.

    python -m benchmarks.consumer_heartbeat [--runs 3] [--sizes 10,100,1000]
"""

from __future__ import annotations

import argparse
import itertools
import time

from kafkaproto import ErrorCode
from logserver.groups.consumer.assignors import uniform
from logserver.groups.consumer.machine import (
    ConsumerGroups,
    ConsumerWritten,
    HeartbeatRequest,
    HeartbeatResult,
)
from logserver.groups.decisions import Append, Decision, Reply

from .stats import Spread

ROUNDS = 3


class Catalog:
    """One topic, as the broker's storage would describe it."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions

    def topic_names(self) -> list[str]:
        return ["t"]

    def partition_count(self, topic: str) -> int | None:
        return self.partitions if topic == "t" else None

    def topic_id(self, topic: str) -> bytes | None:
        return b"t" * 16 if topic == "t" else None

    def topic_for_id(self, topic_id: bytes) -> str | None:
        return "t" if topic_id == b"t" * 16 else None


def _answer(machine: ConsumerGroups, decisions: list[Decision]) -> HeartbeatResult:
    for decision in decisions:
        if isinstance(decision, Append) and isinstance(decision.then, ConsumerWritten):
            decisions = machine.on_written(0, decision.then, ErrorCode.NONE)
            return _answer(machine, decisions)
        if isinstance(decision, Reply):
            result: HeartbeatResult = decision.result
            return result
    raise AssertionError("no reply")


def one_run(size: int) -> float:
    machine = ConsumerGroups()
    catalog = Catalog(2 * size)
    requests = itertools.count(1)

    def beat(member: str, epoch: int, owned: dict[str, set[int]] | None,
             join: bool = False) -> HeartbeatResult:
        request = HeartbeatRequest("g", member, epoch, owned=owned,
                                   rebalance_timeout_ms=60_000 if join else -1,
                                   subscribed_names=["t"] if join else None)
        return _answer(machine, machine.heartbeat(0, next(requests), request, catalog))

    members = [f"m{i}" for i in range(size)]
    for member in members:
        beat(member, 0, {}, join=True)
    group = machine.groups["g"]
    while group.state.value != "Stable":
        for member in members:
            m = group.members[member]
            beat(member, m.epoch, {t: set(ps) for t, ps in m.assigned.items()})
    started = time.perf_counter()
    for _ in range(ROUNDS):
        for member in members:
            beat(member, group.members[member].epoch, None)
    return (time.perf_counter() - started) / (ROUNDS * size)


def assign_times(size: int) -> tuple[float, float]:
    """(fresh target, one member joining a settled group) in seconds, ``uniform``."""
    subscriptions = {f"m{i:05d}": frozenset({"t"}) for i in range(size)}
    started = time.perf_counter()
    settled = uniform(subscriptions, {"t": 2 * size}, {})
    fresh = time.perf_counter() - started
    subscriptions["joiner"] = frozenset({"t"})
    started = time.perf_counter()
    uniform(subscriptions, {"t": 2 * size}, settled)
    return fresh, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sizes", default="10,100,1000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    runs: dict[int, list[float]] = {size: [] for size in sizes}
    fresh: dict[int, list[float]] = {size: [] for size in sizes}
    joins: dict[int, list[float]] = {size: [] for size in sizes}
    for run in range(args.runs):  # the order of sizes alternates from run to run
        for size in sizes if run % 2 == 0 else list(reversed(sizes)):
            runs[size].append(one_run(size))
            new, joined = assign_times(size)
            fresh[size].append(new)
            joins[size].append(joined)
    spreads = {size: Spread.of(values) for size, values in runs.items()}
    for size in sizes:
        s = spreads[size]
        print(f"{size:>5} members: {s.median * 1e6:8.1f} us per steady heartbeat "
              f"[{s.low * 1e6:.1f}-{s.high * 1e6:.1f}], {s.runs} runs")
    ratio = spreads[sizes[-1]].median / spreads[sizes[0]].median
    print(f"largest/smallest group: {ratio:.2f}x")
    for size in sizes:
        a, b = Spread.of(fresh[size]), Spread.of(joins[size])
        print(f"{size:>5} members, uniform: new target {a.median * 1e3:.1f} ms "
              f"[{a.low * 1e3:.1f}-{a.high * 1e3:.1f}], one joins {b.median * 1e3:.1f} ms "
              f"[{b.low * 1e3:.1f}-{b.high * 1e3:.1f}]")


if __name__ == "__main__":
    main()
