"""Cluster health and metrics on a real 3-broker cluster with one broker stopped:
``GET /v1/cluster/health`` on a live broker's admin API, ``logserver cluster health``
(rpk's overview, from Kafka APIs alone), and each broker's /metrics (one cluster for
both: a cluster start is the expensive part)."""

from __future__ import annotations

import json
import urllib.request

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from helpers.admin_cli import ok, ok_json
from helpers.admin_http import scrape, value
from helpers.clusterprocs import running_cluster
from helpers.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _get(url: str) -> dict:
    return json.loads(urllib.request.urlopen(url, timeout=10).read())


def _create(cluster, *topics: NewTopic) -> None:
    admin = cluster.admin()  # held until the futures are done
    for future in admin.create_topics(list(topics)).values():
        future.result(timeout=30)


def test_health_with_one_broker_stopped(tmp_path):
    with running_cluster(tmp_path, 3, **{"min.insync.replicas": 2}) as cluster:
        _create(cluster, NewTopic("spread", 2, 3),
                NewTopic("strict", 1, 3, config={"min.insync.replicas": "3"}),
                NewTopic("alone", 1, replica_assignment=[[3]]))
        one = cluster.brokers[1]
        # A request family has samples once its broker answered a request (a labelled
        # family with no child has none): one Metadata to each broker.
        for broker in cluster.brokers.values():
            AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=30)

        def applied() -> dict | None:
            """Every broker's samples once each has applied the four partitions' states
            and shows every family."""
            m = {n: scrape(b) for n, b in cluster.brokers.items()}
            if _total(m, "kafka_server_replicamanager_partitioncount") != 10:
                return None
            return m if all({name for name, _ in samples} >= FAMILIES
                            for samples in m.values()) else None

        before = wait_until(applied, 60, "every broker's replicas and families in its metrics")
        assert _total(before, "kafka_controller_kafkacontroller_activecontrollercount") == 1
        assert _total(before, "kafka_controller_kafkacontroller_globalpartitioncount") == 4
        assert _total(before, "kafka_server_replicamanager_leadercount") == 4
        assert _total(before, "kafka_server_replicamanager_partitioncount") == 2 * 3 + 3 + 1
        assert _total(before, "kafka_server_replicamanager_underreplicatedpartitions") == 0
        assert _total(before, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
        healthy = _get(one.admin_url + "/v1/cluster/health")
        assert healthy["is_healthy"] is True, healthy
        assert healthy["all_nodes"] == [1, 2, 3] and healthy["nodes_down"] == []
        assert ok_json("cluster", "health", "-b", one.bootstrap)["is_healthy"] is True

        cluster.brokers[3].stop()
        expected = {
            "is_healthy": False,
            "unhealthy_reasons": ["nodes_down", "leaderless_partitions",
                                  "under_replicated_partitions", "under_min_isr_partitions"],
            "all_nodes": [1, 2, 3], "nodes_down": [3],
            "leaderless_partitions": ["alone/0"], "leaderless_count": 1,
            "under_replicated_partitions": ["spread/0", "spread/1", "strict/0"],
            "under_replicated_count": 3,
            "under_min_isr_partitions": ["strict/0"], "under_min_isr_count": 1,
        }

        def settled(view: dict) -> bool:
            return all(view[k] == v for k, v in expected.items())

        for node in (1, 2):
            view = wait_until(lambda n=node: (v := _get(
                cluster.brokers[n].admin_url + "/v1/cluster/health")) and settled(v) and v,
                60, f"node {node}'s health to show node 3 down")
            assert view["controller_id"] in (1, 2), view
        cli = wait_until(lambda: (v := ok_json("cluster", "health", "-b", one.bootstrap))
                         and settled(v) and v, 60, "the CLI to show node 3 down")
        assert cli["controller_id"] in (1, 2), cli
        text = ok("cluster", "health", "-b", one.bootstrap)
        assert "Healthy:" in text and "false" in text.split("Healthy:")[1].splitlines()[0]
        assert "Nodes down:" in text and "[3]" in text.split("Nodes down:")[1].splitlines()[0]
        assert "Leaderless partitions (1):" in text and "[alone/0]" in text, text
        # kafka-topics --under-replicated-partitions / --unavailable-partitions
        under = ok_json("topic", "list", "--under-replicated", "-b", one.bootstrap)
        assert [(r["topic"], r["partition"]) for r in under] == [
            ("spread", 0), ("spread", 1), ("strict", 0)], under
        assert all(3 not in r["isr"] and 3 in r["replicas"] for r in under), under
        offline = ok_json("topic", "list", "--unavailable", "-b", one.bootstrap)
        assert [(r["topic"], r["partition"], r["leader"]) for r in offline] == [
            ("alone", 0, -1)], offline
        assert "spread" in ok("topic", "list", "--under-replicated", "-b", one.bootstrap)

        # the same story in the metrics of the two brokers left
        live = {n: cluster.brokers[n] for n in (1, 2)}
        after = wait_until(lambda: (m := {n: scrape(b) for n, b in live.items()}) and _total(
            m, "kafka_server_replicamanager_underreplicatedpartitions") == 3 and m,
            60, "the under-replicated partitions in the metrics")
        assert _total(after, "kafka_server_replicamanager_underminisrpartitioncount") == 1
        assert _total(after, "kafka_controller_kafkacontroller_activecontrollercount") == 1
        assert _total(after, "kafka_controller_kafkacontroller_offlinepartitionscount") == 1
        assert _total(after, "kafka_controller_kafkacontroller_activebrokercount") == 2
        assert _total(after, "kafka_server_replicamanager_isrshrinks_total") >= 3
        assert _total(after, "kafka_server_replicamanager_isrshrinks_total") > _total(
            {n: before[n] for n in live}, "kafka_server_replicamanager_isrshrinks_total")


FAMILIES = {
    "kafka_server_replicamanager_underreplicatedpartitions",
    "kafka_server_replicamanager_underminisrpartitioncount",
    "kafka_server_replicamanager_partitioncount", "kafka_server_replicamanager_leadercount",
    "kafka_server_replicamanager_isrshrinks_total", "kafka_server_replicamanager_isrexpands_total",
    "kafka_controller_kafkacontroller_activecontrollercount",
    "kafka_controller_kafkacontroller_offlinepartitionscount",
    "kafka_controller_kafkacontroller_globalpartitioncount",
    "kafka_controller_controllerstats_uncleanleaderelections_total",
    "kafka_network_requestmetrics_requests_total",
    "kafka_network_requestmetrics_totaltimems_count",
    "process_resident_memory_bytes", "process_cpu_seconds_total", "python_info",
}


def _total(scrapes: dict, name: str) -> float:
    """A metric summed over the brokers' scrapes (unlabelled samples)."""
    return sum(value(samples, name) for samples in scrapes.values())
