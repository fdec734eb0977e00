"""The server's request metrics: latency per Kafka API key, and the requests waiting now.

The histograms are :class:`commonlib.latency.LatencyHistogram` (cheap enough for every
request); the admin listener's collector turns them into Prometheus histograms at
scrape time.
"""

from __future__ import annotations

from commonlib.latency import LatencyHistogram

# Upper bounds in seconds (Prometheus ``le``) of every server histogram: requests, flushes.
BUCKETS: tuple[float, ...] = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                              0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def latency_histogram() -> LatencyHistogram:
    """An empty histogram with the server's buckets."""
    return LatencyHistogram(BUCKETS)


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
            histogram = self.by_api[api_key] = latency_histogram()
        histogram.observe(seconds)
