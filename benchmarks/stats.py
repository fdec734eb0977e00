"""Figures from repeated runs: a median with its range, and whether two sides differ.

Every figure the suite prints is the median of its runs with the lowest and highest run
beside it. Two servers' figures count as different only when their ranges do not
overlap: with 3 runs a side, every run of one side beating every run of the other
happens by chance with probability 1/20 each way (a Mann-Whitney U of 0), so a
"better" or "worse" verdict holds at p = 0.1 two-sided; anything else is "even".
With fewer than 3 runs a side the verdict is always "even".
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: Fewer runs than this and no verdict other than "even" is given.
MIN_RUNS = 3


@dataclass(frozen=True)
class Spread:
    """The median of some runs' values, their minimum and maximum, and how many runs."""

    median: float
    low: float
    high: float
    runs: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        """The spread of ``values`` (at least one)."""
        if not values:
            raise ValueError("no values")
        return cls(float(statistics.median(values)), float(min(values)), float(max(values)),
                   len(values))

    def overlaps(self, other: Spread) -> bool:
        """True if the two ranges share at least one point."""
        return self.low <= other.high and other.low <= self.high

    def to_json(self) -> dict[str, float]:
        return {"median": self.median, "min": self.low, "max": self.high, "runs": self.runs}


@dataclass(frozen=True)
class Comparison:
    """Ours against a peer: the ratio of medians (> 1: ours better) and the verdict."""

    ratio: float
    verdict: str  # "better", "worse" or "even"

    def text(self) -> str:
        """``1.47x better``, ``0.21x worse`` or ``even (1.05x)``."""
        if self.verdict == "even":
            return f"even ({self.ratio:.2f}x)"
        return f"{self.ratio:.2f}x {self.verdict}"

    def to_json(self) -> dict[str, object]:
        return {"ratio": self.ratio, "verdict": self.verdict}


def compare(ours: Spread, theirs: Spread, higher_is_better: bool) -> Comparison | None:
    """How ours compares with theirs; None when a median is zero (no ratio)."""
    if ours.median <= 0 or theirs.median <= 0:
        return None
    ratio = ours.median / theirs.median if higher_is_better else theirs.median / ours.median
    if ours.runs < MIN_RUNS or theirs.runs < MIN_RUNS or ours.overlaps(theirs):
        verdict = "even"
    else:
        verdict = "better" if ratio > 1 else "worse"
    return Comparison(round(ratio, 3), verdict)


def number(value: float, digits: int = 0) -> str:
    """A figure with thousands separators: 1234567 -> '1,234,567'; small ones keep digits."""
    if abs(value) < 10 and digits == 0:
        digits = 2
    return f"{value:,.{digits}f}"


def spread_text(s: Spread, digits: int = 0, unit: str = "") -> str:
    """``1,468,438 [1,402,113-1,510,000] rec/s``: the median, then the range."""
    tail = f" {unit}" if unit else ""
    return f"{number(s.median, digits)} [{number(s.low, digits)}-{number(s.high, digits)}]{tail}"
