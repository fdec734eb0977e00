"""The seeded nemesis plan: which fault, against which role, how long, in what order.

A role is resolved when the fault is due, against the cluster as it is then (the leader
of a data partition moves after every failover); the plan itself is pure, and one seed
gives one plan.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

#: fault kind -> the roles it may hit
KINDS: dict[str, tuple[str, ...]] = {
    "kill9": ("leader", "group-coordinator", "txn-coordinator", "broker"),
    "sigstop": ("leader", "group-coordinator", "txn-coordinator"),
    "etcd-kill": ("etcd",),
    "etcd-pause": ("etcd",),
    "partition": ("leader", "group-coordinator", "txn-coordinator", "broker"),
    "rolling-restart": ("all-brokers",),
}
#: network partitions need the brokers in network namespaces (root)
NEEDS_NETNS = {"partition"}


@dataclass(frozen=True)
class Step:
    kind: str
    role: str
    hold_s: float  # how long the fault lasts (down, stopped, cut off)
    gap_s: float  # quiet time before it, once the cluster is whole again
    pick: int  # breaks ties when a role names several targets (a random broker)

    def __str__(self) -> str:
        return f"{self.kind}({self.role}, {self.hold_s:.1f}s)"


def plan(seed: int, count: int, kinds: list[str] | None = None, *,
         hold: tuple[float, float] = (0.5, 5.0), gap: tuple[float, float] = (0.5, 2.0),
         cover: bool = True) -> list[Step]:
    """``count`` steps drawn with ``random.Random(seed)`` from ``kinds`` (default: all).
    ``cover``: the first ``len(kinds)`` steps use every kind once (in random order), so a
    short run still meets each fault; the rest are drawn freely."""
    chosen = list(kinds or KINDS)
    unknown = set(chosen) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {sorted(KINDS)}")
    rng = random.Random(seed)
    order = rng.sample(chosen, len(chosen)) if cover else []
    steps = []
    for i in range(count):
        kind = order[i] if i < len(order) else rng.choice(chosen)
        steps.append(Step(kind, rng.choice(KINDS[kind]), round(rng.uniform(*hold), 2),
                          round(rng.uniform(*gap), 2), rng.randrange(1 << 30)))
    return steps
