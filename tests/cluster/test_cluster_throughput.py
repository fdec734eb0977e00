"""Throughput across the cluster from any broker (docs/operations.md): three real brokers
on a real etcd. Broker 2 alone holds a topic; while a producer writes to it, broker 1's
admin API (``/v1/cluster/throughput``) and its ``/metrics`` show broker 2's bytes in per
second, which only broker 2's counters hold (broker 1 reads them from broker 2's admin
listener). A stopped broker is listed as unreachable, not dropped.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic
from helpers.clusterprocs import Cluster, running_cluster
from helpers.waiting import wait_until

pytestmark = pytest.mark.timeout(180)

TOPIC = "on-two"


@pytest.fixture
def cluster(tmp_path) -> Iterator[Cluster]:
    with running_cluster(tmp_path, 3) as nodes:
        yield nodes


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=20) as response:
        return json.loads(response.read())


def metric(url: str, name: str, **labels: str) -> float | None:
    """The value of one sample of ``url``'s Prometheus text, None when absent."""
    with urllib.request.urlopen(url + "/metrics", timeout=20) as response:
        text = response.read().decode()
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    found = re.search(rf"^{name}\{{{re.escape(wanted)}\}} (\S+)$", text, re.MULTILINE)
    return None if found is None else float(found.group(1))


def test_broker_1_reports_broker_2s_bytes_in_and_a_stopped_broker(cluster: Cluster) -> None:
    admin = cluster.admin()
    admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[2]])])[TOPIC].result(timeout=30)
    wait_until(lambda: (p := cluster.partition(TOPIC, 0)) is not None and p.leader == 2, 60,
               f"{TOPIC} led by broker 2")
    one = cluster.brokers[1].admin_url
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0})

    def broker_2_rate() -> dict[str, Any] | None:
        for i in range(20):  # keep writing while broker 1 is asked
            producer.produce(TOPIC, value=b"x" * 100, key=b"%d" % i)
        assert producer.flush(30) == 0
        rows = {b["node_id"]: b for b in get_json(one + "/v1/cluster/throughput")["brokers"]}
        two = rows.get(2)
        if two is None or not two["reachable"]:
            return None
        rate = two["topics"].get(TOPIC, {}).get("bytes_in_per_second", 0)
        return two if rate > 0 else None
    two = wait_until(broker_2_rate, 60, "broker 2's bytes in on broker 1's API")
    assert two["state"] == "alive" and two["bytes_in_per_second"] > 0
    body = get_json(one + "/v1/cluster/throughput")
    assert sorted(b["node_id"] for b in body["brokers"]) == [1, 2, 3]
    # Broker 1 holds no replica of the topic: its own counters have nothing of it.
    mine = next(b for b in body["brokers"] if b["node_id"] == 1)
    assert TOPIC not in mine["topics"]

    def scraped() -> float | None:
        for i in range(20):
            producer.produce(TOPIC, value=b"y" * 100, key=b"%d" % i)
        assert producer.flush(30) == 0
        value = metric(one, "logserver_cluster_bytes_in_per_second", node_id="2", topic=TOPIC)
        return value if value is not None and value > 0 else None
    wait_until(scraped, 60, "broker 2's bytes in on broker 1's /metrics")
    assert metric(one, "logserver_cluster_broker_reachable", node_id="2") == 1

    cluster.brokers[3].stop()

    def three_unreachable() -> dict[str, Any] | None:
        rows = {b["node_id"]: b for b in get_json(one + "/v1/cluster/throughput")["brokers"]}
        three = rows.get(3)
        return three if three is not None and not three["reachable"] else None
    three = wait_until(three_unreachable, 60, "broker 3 listed as unreachable")
    assert three["error"]
    assert metric(one, "logserver_cluster_broker_reachable", node_id="3") == 0
