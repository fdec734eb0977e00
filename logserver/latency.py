"""Latency histograms cheap enough for every request: a bisect and two additions.

prometheus-client's own Histogram takes a lock and looks its labels up on each call;
the hot path (network.py, durability.py) records into these plain objects instead, and
the admin listener's collector turns them into Prometheus histograms at scrape time.
"""

from __future__ import annotations

from bisect import bisect_left

# Upper bounds in seconds (Prometheus ``le``); a last, implicit bucket is +Inf.
BUCKETS: tuple[float, ...] = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                              0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


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

    def cumulative(self) -> list[tuple[str, int]]:
        """Prometheus buckets: (le, observations <= le), ending with +Inf."""
        buckets, running = [], 0
        for bound, count in zip((*map(repr, BUCKETS), "+Inf"), self.counts, strict=True):
            running += count
            buckets.append((bound, running))
        return buckets


class RequestMetrics:
    """Requests and their latency (arrival to response ready) per Kafka API key, and the
    requests waiting now (delayed: a Produce for its fsync or the ISR, a long-poll Fetch)."""

    __slots__ = ("by_api", "waiting")

    def __init__(self) -> None:
        self.by_api: dict[int, LatencyHistogram] = {}
        self.waiting: dict[int, int] = {}

    def wait_started(self, api_key: int) -> None:
        self.waiting[api_key] = self.waiting.get(api_key, 0) + 1

    def wait_ended(self, api_key: int) -> None:
        self.waiting[api_key] -= 1

    def observe(self, api_key: int, seconds: float) -> None:
        histogram = self.by_api.get(api_key)
        if histogram is None:
            histogram = self.by_api[api_key] = LatencyHistogram()
        histogram.observe(seconds)
