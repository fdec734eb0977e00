"""Prometheus metrics, collected at scrape time from the broker's own counters.

Nothing here runs per request: the hot path only bumps plain counters (Partition's
bytes/messages, ``RequestMetrics``, the durability's flush histogram), and this
collector reads them when /metrics is scraped, into a registry of its own (never the
process-global one). Names follow Kafka's JMX metrics as the Prometheus JMX exporter
renders them (``kafka_server_brokertopicmetrics_...``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from kafkaproto import ApiKey
from logserver.admin import views
from logserver.latency import LatencyHistogram

if TYPE_CHECKING:
    from logserver.admin.state import AdminState


class BrokerCollector(Collector):
    def __init__(self, state: AdminState) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        state = self._state
        stats = state.stats
        yield GaugeMetricFamily("kafka_server_socketservermetrics_connection_count",
                                "Open client connections.", value=stats.open_connections)
        failed = CounterMetricFamily(
            "kafka_server_socketservermetrics_failed_authentication",
            "Connections that failed to authenticate, per listener and reason "
            "(ssl_handshake: a failed or timed-out TLS handshake; sasl: a failed SASL login).",
            labels=["listener", "reason"])
        for (listener, reason), count in sorted(stats.tls_failures.counts.items()):
            failed.add_metric([listener, reason], count)
        broker = state.broker
        if broker is not None:
            for listener, count in sorted(broker.sasl_failures.items()):
                failed.add_metric([listener, "sasl"], count)
            yield CounterMetricFamily(
                "kafka_server_socketservermetrics_failed_authentication_delayed",
                "SASL logins held back because their address's logins had just failed "
                "(connection.failed.authentication.delay.ms, doubling per failure).",
                value=broker.login_backoff.delayed_total)
        yield failed
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests", "Requests answered, per API.",
            labels=["request"])
        latency = HistogramMetricFamily(
            "kafka_network_requestmetrics_total_time_seconds",
            "Time from a request's arrival to its response being ready, per API.",
            labels=["request"])
        for api_key, histogram in sorted(stats.request_metrics.by_api.items()):
            name = views.api_name(api_key)
            requests.add_metric([name], histogram.count)
            latency.add_metric([name], histogram.cumulative(), histogram.total)
        yield requests
        yield latency
        yield GaugeMetricFamily("logserver_ready", "1 once recovery is done and serving.",
                                value=1 if state.ready else 0)
        broker = state.broker
        if broker is None:
            return
        yield from _topic_metrics(state)
        yield from _group_metrics(state)
        fsync = broker.storage.fsync_latency
        if fsync is not None:
            yield _histogram("kafka_log_logflushstats_log_flush_time_seconds",
                             "Duration of a flush round (fsync of every dirty log).", fsync)


def _histogram(name: str, documentation: str, histogram: LatencyHistogram) -> Metric:
    family = HistogramMetricFamily(name, documentation)
    family.add_metric([], histogram.cumulative(), histogram.total)
    return family


def _topic_metrics(state: AdminState) -> Iterator[Metric]:
    broker = state.broker
    assert broker is not None
    prefix = "kafka_server_brokertopicmetrics_"
    bytes_in = CounterMetricFamily(prefix + "bytes_in", "Record batch bytes appended, per topic.",
                                   labels=["topic"])
    bytes_out = CounterMetricFamily(prefix + "bytes_out", "Record bytes fetched, per topic.",
                                    labels=["topic"])
    messages_in = CounterMetricFamily(prefix + "messages_in", "Records appended, per topic.",
                                      labels=["topic"])
    end = GaugeMetricFamily("kafka_log_log_log_end_offset", "Log end offset.",
                            labels=["topic", "partition"])
    start = GaugeMetricFamily("kafka_log_log_log_start_offset", "Log start offset.",
                              labels=["topic", "partition"])
    size = GaugeMetricFamily("kafka_log_log_size", "Bytes of a partition's segment files.",
                             labels=["topic", "partition"])
    segments = GaugeMetricFamily("kafka_log_log_num_log_segments", "Segments of a partition.",
                                 labels=["topic", "partition"])
    waiting = 0
    for topic in broker.storage.topic_names():
        stats = broker.storage.partition_stats(topic)
        if stats is None:
            continue
        waiting += sum(s.waiting_fetches for s in stats)
        bytes_in.add_metric([topic], sum(s.bytes_in for s in stats))
        bytes_out.add_metric([topic], sum(s.bytes_out for s in stats))
        messages_in.add_metric([topic], sum(s.messages_in for s in stats))
        for s in stats:
            labels = [topic, str(s.partition)]
            end.add_metric(labels, s.log_end_offset)
            start.add_metric(labels, s.log_start_offset)
            size.add_metric(labels, s.size_bytes)
            segments.add_metric(labels, s.segment_count)
    waiting_requests = state.stats.request_metrics.waiting
    produce = waiting_requests.get(ApiKey.PRODUCE, 0)
    purgatory = GaugeMetricFamily(
        "kafka_server_delayedoperationpurgatory_purgatory_size",
        "Delayed operations watched: Produce requests waiting for their acks (the fsync, "
        "or acks=all the ISR); long-poll fetches parked until data arrives or max.wait.ms "
        "passes (one per partition watched).", labels=["delayed_operation"])
    purgatory.add_metric(["Produce"], produce)
    purgatory.add_metric(["Fetch"], waiting)
    delayed = GaugeMetricFamily(
        "kafka_server_delayedoperationpurgatory_num_delayed_operations",
        "Requests whose response waits now (one per request).", labels=["delayed_operation"])
    delayed.add_metric(["Produce"], produce)
    delayed.add_metric(["Fetch"], waiting_requests.get(ApiKey.FETCH, 0))
    yield from (bytes_in, bytes_out, messages_in, end, start, size, segments, purgatory, delayed)


def _group_metrics(state: AdminState) -> Iterator[Metric]:
    broker = state.broker
    assert broker is not None
    lag = GaugeMetricFamily("kafka_consumergroup_lag",
                            "High watermark minus the group's committed offset.",
                            labels=["group", "topic", "partition"])
    for group in views.group_lags(broker):
        for p in group["partitions"]:
            lag.add_metric([group["group_id"], p["topic"], str(p["partition"])], p["lag"])
    yield lag


def registry(state: AdminState) -> CollectorRegistry:
    """A registry of this server's own (several servers may share a test process)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(BrokerCollector(state))
    return reg
