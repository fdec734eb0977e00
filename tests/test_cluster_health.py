"""Cluster health and metrics on a real 3-broker cluster with one broker stopped:
``GET /v1/cluster/health`` on a live broker's admin API, ``logserver cluster health``
(rpk's overview, from Kafka APIs alone), and each broker's /metrics."""

from __future__ import annotations

import json
import urllib.request

import pytest
from clusterprocs import running_cluster, wait_until
from confluent_kafka.admin import NewTopic
from support.admin_cli import ok, ok_json

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
