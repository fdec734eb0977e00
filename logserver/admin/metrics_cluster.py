"""Replica manager and controller metrics, named as the Prometheus JMX exporter's stock
Kafka config (example_configs/kafka-2_0_0.yml) renders Kafka's MBeans:
``kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions`` (a ``Value``) becomes
``kafka_server_replicamanager_underreplicatedpartitions``, a ``...PerSec`` meter's
``Count`` becomes ``kafka_<domain>_<type>_<name without PerSec>_total``.

As in Kafka, the replica manager's gauges count the partitions this broker holds or
leads, and the controller's gauges are non-zero on the active controller only (sum them
over the brokers). A single broker is its own controller and leads every partition.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from logserver.cluster.model import NO_LEADER
from logserver.topic_config import min_insync_replicas

if TYPE_CHECKING:
    from logserver.cluster_access import WithCluster

_RM = "kafka_server_replicamanager_"
_KC = "kafka_controller_kafkacontroller_"
_CS = "kafka_controller_controllerstats_"


def _gauge(name: str, doc: str, value: float) -> Metric:
    return GaugeMetricFamily(name, doc, value=value)


def collect(broker: WithCluster) -> Iterator[Metric]:
    node = broker.cluster
    if node is None:
        partitions = sum(len(broker.storage.partition_stats(t) or ())
                         for t in broker.storage.topic_names())
        leading = partitions
        under = under_min = offline = shrinks = expands = unclean = 0
        controller, topics, live = True, len(broker.storage.topic_names()), 1
        total = partitions
    else:
        model = node.model
        me = broker.node_id
        states = [(topic, v.state) for (topic, _), v in list(model.partitions.items())]
        partitions = sum(1 for _, s in states if me in s.replicas)
        led = [(topic, s) for topic, s in states if s.leader == me]
        leading = len(led)
        under = sum(1 for _, s in led if len(s.isr) < len(s.replicas))

        def min_isr(topic: str) -> int:
            record = model.topics.get(topic)
            return min_insync_replicas(None if record is None else record.configs,
                                       node.min_isr)

        under_min = sum(1 for t, s in led if len(s.isr) < min(min_isr(t), len(s.replicas)))
        controller = model.controller_id == me
        alive = set(model.brokers)
        offline = sum(1 for _, s in states
                      if s.leader == NO_LEADER or s.leader not in alive) if controller else 0
        total = len(states) if controller else 0
        topics = len(model.topics) if controller else 0
        live = len(alive) if controller else 0
        stats = node.replica_stats
        shrinks, expands = stats.isr_shrinks, stats.isr_expands
        unclean = stats.unclean_leader_elections
    yield _gauge(_RM + "partitioncount", "Partitions this broker holds a replica of.",
                 partitions)
    yield _gauge(_RM + "leadercount", "Partitions this broker leads.", leading)
    yield _gauge(_RM + "underreplicatedpartitions",
                 "Partitions this broker leads whose ISR is smaller than their replicas.",
                 under)
    yield _gauge(_RM + "underminisrpartitioncount",
                 "Partitions this broker leads whose ISR is below min.insync.replicas "
                 "(acks=all writes fail).", under_min)
    yield CounterMetricFamily(_RM + "isrshrinks", "ISR shrinks of partitions this broker "
                              "leads.", value=shrinks)
    yield CounterMetricFamily(_RM + "isrexpands", "ISR expansions of partitions this broker "
                              "leads.", value=expands)
    yield _gauge(_KC + "activecontrollercount", "1 on the active controller, else 0.",
                 1 if controller else 0)
    yield _gauge(_KC + "offlinepartitionscount", "Partitions without a live leader "
                 "(controller only).", offline)
    yield _gauge(_KC + "globalpartitioncount", "Partitions in the cluster (controller only).",
                 total)
    yield _gauge(_KC + "globaltopiccount", "Topics in the cluster (controller only).", topics)
    yield _gauge(_KC + "activebrokercount", "Registered (live) brokers (controller only).",
                 live)
    yield CounterMetricFamily(_CS + "uncleanleaderelections", "Leaders elected from outside "
                              "the ISR (unclean.leader.election.enable) by this broker as "
                              "controller.", value=unclean)
