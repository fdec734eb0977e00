"""The bridge's PUBACK latency histogram: a QoS 1/2 PUBLISH received to its PUBACK/PUBREC
written, the log write between (``mqtt_puback_latency_seconds`` on /metrics)."""

from __future__ import annotations

from commonlib.latency import LatencyHistogram

# Upper bounds in seconds (Prometheus ``le``); a last, implicit bucket is +Inf.
BUCKETS: tuple[float, ...] = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                              0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def puback_histogram() -> LatencyHistogram:
    """An empty histogram with the bridge's buckets."""
    return LatencyHistogram(BUCKETS)
