"""A latency histogram cheap enough for every acknowledged PUBLISH: a bisect and two
additions, no lock and no label lookup (prometheus-client's Histogram does both per call).
The admin listener turns it into a Prometheus histogram when /metrics is scraped.
"""

from __future__ import annotations

from bisect import bisect_left

# Upper bounds in seconds (Prometheus ``le``); a last, implicit bucket is +Inf.
BUCKETS: tuple[float, ...] = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                              0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class LatencyHistogram:
    """Counts per bucket (not cumulative) and the sum of what was observed."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(BUCKETS, seconds)] += 1
        self.total += seconds

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, float]]:
        """Prometheus buckets: (le, observations <= le), ending with +Inf."""
        buckets: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip((*map(repr, BUCKETS), "+Inf"), self.counts, strict=True):
            running += count
            buckets.append((bound, running))
        return buckets
