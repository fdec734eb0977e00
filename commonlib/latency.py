"""Latency histograms cheap enough for every request or PUBLISH: a bisect and two additions.

prometheus-client's own Histogram takes a lock and looks its labels up on each call; the
hot paths (the server's network.py and durability.py, the bridge's PUBACK) record into
these plain objects instead, and each program's admin listener turns them into
Prometheus histograms at scrape time. Each program picks its own bucket bounds.
"""

from __future__ import annotations

from bisect import bisect_left


class LatencyHistogram:
    """Counts per bucket (not cumulative) and the sum of what was observed.

    ``bounds``: upper bounds in seconds (Prometheus ``le``), ascending; a last, implicit
    bucket is +Inf.
    """

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.total += seconds

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, float]]:
        """Prometheus buckets: (le, observations <= le), ending with +Inf."""
        buckets: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip((*map(repr, self.bounds), "+Inf"), self.counts, strict=True):
            running += count
            buckets.append((bound, running))
        return buckets
