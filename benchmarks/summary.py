"""One workload on one server over all its runs: every figure as a median with its range.

The runs themselves stay in the result file; tables, plots and the issue's checks read
these summaries, so whatever is printed is a median of the runs with min and max beside
it, and ours is compared with a peer only through ``stats.compare``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .stats import Comparison, Spread, compare
from .workloads import WorkloadResult

#: Per-run fields summarised besides every key of ``metrics``.
_FIELDS = ("records_per_s", "mb_per_s")


@dataclass
class Summary:
    """The runs of one workload on one target."""

    workload: str
    kind: str
    target: str
    role: str
    primary: str
    higher_is_better: bool
    runs: list[WorkloadResult]

    def spread(self, name: str | None = None) -> Spread | None:
        """The median and range of a figure (default: the primary one) over the runs."""
        values = [v for r in self.runs if (v := r.value(name or self.primary)) is not None]
        return Spread.of(values) if values else None

    def figures(self) -> dict[str, Spread]:
        """Every figure the runs have, by name."""
        names = dict.fromkeys(_FIELDS)
        for r in self.runs:
            names.update(dict.fromkeys(r.metrics))
        return {n: s for n in names if (s := self.spread(n)) is not None}

    @property
    def failed_runs(self) -> int:
        """Runs that could not finish as planned (unacknowledged records, lost notices)."""
        return sum(1 for r in self.runs if r.capped)

    @property
    def errors(self) -> int:
        return sum(r.errors for r in self.runs)

    def to_json(self, ours: Summary | None) -> dict[str, object]:
        out: dict[str, object] = {
            "workload": self.workload, "kind": self.kind, "target": self.target,
            "role": self.role, "primary": self.primary,
            "higher_is_better": self.higher_is_better, "runs": len(self.runs),
            "failed_runs": self.failed_runs, "errors": self.errors,
            "figures": {k: v.to_json() for k, v in self.figures().items()},
        }
        vs = versus(self, ours)
        if vs is not None:
            out["vs_ours"] = vs.to_json()
        return out


def summarize(workloads: list[WorkloadResult], roles: dict[str, str]) -> list[Summary]:
    """Groups runs by (workload, target), in the order they first appear."""
    groups: dict[tuple[str, str], list[WorkloadResult]] = {}
    for w in workloads:
        groups.setdefault((w.workload, w.target), []).append(w)
    return [
        Summary(runs[0].workload, runs[0].kind, target, roles.get(target, "peer"),
                runs[0].primary, runs[0].higher_is_better, runs)
        for (_, target), runs in groups.items()
    ]


def ours_of(summaries: list[Summary], workload: str) -> Summary | None:
    """Our summary of ``workload``, if it ran."""
    return next((s for s in summaries if s.workload == workload and s.role == "ours"), None)


def versus(peer: Summary, ours: Summary | None) -> Comparison | None:
    """How ours compares with ``peer`` on the primary figure (None for ours itself)."""
    if ours is None or peer.role == "ours":
        return None
    mine, theirs = ours.spread(), peer.spread()
    if mine is None or theirs is None:
        return None
    return compare(mine, theirs, peer.higher_is_better)
