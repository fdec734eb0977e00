"""Prometheus metrics, collected at scrape time from the broker's own counters.

Nothing here runs per request: the hot path only bumps plain counters (Partition's
bytes/messages, ``RequestMetrics``, the durability's flush histogram), and this
collector reads them when /metrics is scraped, into a registry of its own (never the
process-global one).

The naming convention (docs/operations.md, "Metric names"): a Kafka MBean's metric is
named as the Prometheus JMX exporter's stock Kafka config (kafka-2_0_0.yml) renders it,
``kafka_<domain>_<type>_<name>`` lower-cased, a ``...PerSec`` meter's count as
``..._total`` without ``PerSec``, the MBean's keys as labels (``topic``, ``partition``,
``request``, ``delayedOperation``); a timer (``TotalTimeMs``) is a Prometheus histogram of
that name in milliseconds (its ``_count`` is the exporter's). Consumer lag is
kafka_exporter's ``kafka_consumergroup_lag{consumergroup,topic,partition}``. Metrics
Kafka has no MBean for keep a name of our own, listed as such in the docs; process and
Python runtime metrics are prometheus-client's standard collectors.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from commonlib.latency import LatencyHistogram
from kafkaproto import ApiKey
from logserver.admin import metrics_cluster, views

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
            "kafka_network_requestmetrics_totaltimems",
            "Milliseconds from a request's arrival to its response being ready, per API.",
            labels=["request"])
        for api_key, histogram in sorted(stats.request_metrics.by_api.items()):
            name = views.api_name(api_key)
            requests.add_metric([name], histogram.count)
            latency.add_metric([name], _ms_buckets(histogram), histogram.total * 1000)
        yield requests
        yield latency
        yield GaugeMetricFamily("logserver_ready", "1 once recovery is done and serving.",
                                value=1 if state.ready else 0)
        broker = state.broker
        if broker is None:
            return
        yield from _topic_metrics(state)
        yield from _group_metrics(state)
        yield from metrics_cluster.collect(broker)
        fsync = broker.storage.fsync_latency
        if fsync is not None:
            yield _histogram("kafka_log_logflushstats_logflushrateandtimems",
                             "Milliseconds of a flush round (fsync of every dirty log).", fsync)


def _ms_buckets(histogram: LatencyHistogram) -> list[tuple[str, float]]:
    """The histogram's cumulative buckets with their bounds in milliseconds (Kafka's
    ``...TimeMs`` timers are in ms)."""
    bounds = [repr(round(b * 1000, 6)) for b in histogram.bounds] + ["+Inf"]
    return [(bound, count) for bound, (_, count) in
            zip(bounds, histogram.cumulative(), strict=True)]


def _histogram(name: str, documentation: str, histogram: LatencyHistogram) -> Metric:
    family = HistogramMetricFamily(name, documentation)
    family.add_metric([], _ms_buckets(histogram), histogram.total * 1000)
    return family


def _topic_metrics(state: AdminState) -> Iterator[Metric]:
    broker = state.broker
    assert broker is not None
    prefix = "kafka_server_brokertopicmetrics_"
    bytes_in = CounterMetricFamily(prefix + "bytesin", "Record batch bytes appended, per topic.",
                                   labels=["topic"])
    bytes_out = CounterMetricFamily(prefix + "bytesout", "Record bytes fetched, per topic.",
                                    labels=["topic"])
    messages_in = CounterMetricFamily(prefix + "messagesin", "Records appended, per topic.",
                                      labels=["topic"])
    end = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset.",
                            labels=["topic", "partition"])
    start = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start offset.",
                              labels=["topic", "partition"])
    size = GaugeMetricFamily("kafka_log_log_size", "Bytes of a partition's segment files.",
                             labels=["topic", "partition"])
    segments = GaugeMetricFamily("kafka_log_log_numlogsegments", "Segments of a partition.",
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
        "kafka_server_delayedoperationpurgatory_purgatorysize",
        "Delayed operations watched: Produce requests waiting for their acks (the fsync, "
        "or acks=all the ISR); long-poll fetches parked until data arrives or max.wait.ms "
        "passes (one per partition watched).", labels=["delayedOperation"])
    purgatory.add_metric(["Produce"], produce)
    purgatory.add_metric(["Fetch"], waiting)
    delayed = GaugeMetricFamily(
        "kafka_server_delayedoperationpurgatory_numdelayedoperations",
        "Requests whose response waits now (one per request).", labels=["delayedOperation"])
    delayed.add_metric(["Produce"], produce)
    delayed.add_metric(["Fetch"], waiting_requests.get(ApiKey.FETCH, 0))
    yield from (bytes_in, bytes_out, messages_in, end, start, size, segments, purgatory, delayed)


def _group_metrics(state: AdminState) -> Iterator[Metric]:
    broker = state.broker
    assert broker is not None
    labels = ["consumergroup", "topic", "partition"]
    lag = GaugeMetricFamily("kafka_consumergroup_lag",
                            "High watermark minus the group's committed offset.", labels=labels)
    current = GaugeMetricFamily("kafka_consumergroup_current_offset",
                                "The group's committed offset.", labels=labels)
    lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum",
                                "The group's lag over a topic's partitions.",
                                labels=["consumergroup", "topic"])
    for group in views.group_lags(broker):
        by_topic: dict[str, int] = {}
        for p in group["partitions"]:
            where = [group["group_id"], p["topic"], str(p["partition"])]
            lag.add_metric(where, p["lag"])
            current.add_metric(where, p["committed_offset"])
            by_topic[p["topic"]] = by_topic.get(p["topic"], 0) + p["lag"]
        for topic, total in sorted(by_topic.items()):
            lag_sum.add_metric([group["group_id"], topic], total)
    yield from (lag, current, lag_sum)


def registry(state: AdminState) -> CollectorRegistry:
    """A registry of this server's own (several servers may share a test process)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(BrokerCollector(state))
    # process_* (CPU, memory, open fds) and python_* (version, GC): the standard names
    ProcessCollector(registry=reg)
    PlatformCollector(registry=reg)
    GCCollector(registry=reg)
    return reg
