"""The dashboard's event stream in cluster mode, against three real brokers on a real
etcd: every registered broker, the controller and each partition's leader, replicas and
in-sync replicas as Metadata (confluent-kafka's admin client) reports them. The stream is
read as any EventSource reads it: ``event:``/``data:`` lines, a blank line per event.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import NewTopic
from helpers.admin_http import events
from helpers.clusterprocs import Cluster, running_cluster
from helpers.group_offsets import COMMITTED, commit, group_on
from helpers.waiting import wait_until

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def cluster(tmp_path):
    with running_cluster(tmp_path, 3, **{"default.replication.factor": 3}) as nodes:
        yield nodes


def test_stream_shows_brokers_controller_and_leaders(cluster: Cluster) -> None:
    admin = cluster.admin()
    for future in admin.create_topics([NewTopic("spread", 3, 3)]).values():
        future.result(timeout=30)
    wait_until(lambda: all((p := cluster.partition("spread", i)) is not None
                           and len(p.isrs) == 3 for i in range(3)), 60, "3 in-sync replicas")
    meta = cluster.metadata()
    expected = {i: (p.leader, sorted(p.replicas), sorted(p.isrs))
                for i, p in meta.topics["spread"].partitions.items()}

    def matching_sample() -> dict[str, Any] | None:
        stream = events(cluster.brokers[2].admin_url + "/dashboard/events")
        name, history = next(stream)
        assert name == "history" and isinstance(history, list)
        for _, sample in stream:  # live samples, one a second
            shown = {p["partition"]: (p["leader"], sorted(p["replicas"]), sorted(p["isr"]))
                     for p in sample["partitions"] if p["topic"] == "spread"}
            if shown == expected:
                return sample
            if sample["time"] - (history[-1]["time"] if history else sample["time"]) > 10:
                return None
        return None

    sample = wait_until(matching_sample, 60, f"the stream to show {expected}")
    cluster_view = sample["cluster"]
    assert cluster_view["mode"] == "cluster"
    assert cluster_view["controller_id"] == meta.controller_id
    assert {b["node_id"]: b["port"] for b in cluster_view["brokers"]} == {
        n: b.port for n, b in cluster.brokers.items()}
    with urllib.request.urlopen(cluster.brokers[3].admin_url + "/v1/cluster") as response:
        api = json.loads(response.read())
    assert api["controller_id"] == meta.controller_id
    assert [b["node_id"] for b in api["brokers"]] == [1, 2, 3]
    held = [p for p in sample["partitions"] if p["topic"] == "spread"]
    assert all(p["size_bytes"] == 0 and p["log_end_offset"] == 0 for p in held), held

    # The admin API's topic id is the cluster's (Metadata's), on every broker, not the
    # broker's own local one.
    described = admin.describe_topics(TopicCollection(["spread"]))["spread"].result(30)
    uuid = described.topic_id
    cluster_id_hex = (f"{uuid.get_most_significant_bits() & (2**64 - 1):016x}"
                      f"{uuid.get_least_significant_bits() & (2**64 - 1):016x}")
    for node, broker in cluster.brokers.items():
        with urllib.request.urlopen(broker.admin_url + "/v1/topics/spread") as response:
            assert json.loads(response.read())["topic_id"] == cluster_id_hex, node


def first_sample(url: str, check: Any, samples: int = 15) -> dict[str, Any] | None:
    """The first of the next ``samples`` live samples (history included) that passes
    ``check``, else None (the caller waits and asks again)."""
    for n, (name, data) in enumerate(events(url)):
        for sample in data if name == "history" else [data]:
            if check(sample):
                return sample
        if n >= samples:
            return None
    return None


def test_stream_is_cluster_wide_groups_rates_and_a_down_broker(tmp_path) -> None:
    """Broker 1's live feed shows a group broker 2 coordinates with its lag, the
    messages per second of a partition only brokers 2 and 3 hold, and broker 3 once it
    stops, as down rather than dropped (the local-only feed showed none of these)."""
    from confluent_kafka import Producer

    with running_cluster(tmp_path, 3) as cluster:
        admin = cluster.admin()
        topic = "cluster-lag"
        for future in admin.create_topics([NewTopic(topic, 1, replica_assignment=[[2, 3]])
                                           ]).values():
            future.result(timeout=30)
        group = group_on(cluster, 2)
        feed = cluster.brokers[1].admin_url + "/dashboard/events"
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for _ in range(30):
            producer.produce(topic, value=b"x" * 100, partition=0)
        assert producer.flush(30) == 0
        wait_until(lambda: commit(admin, group, topic), 60, f"{group}'s offset committed")

        def lag_shown(sample: dict[str, Any]) -> bool:
            return any(g["group_id"] == group and g["lag"] == 30 - COMMITTED
                       and g.get("coordinator") == 2 for g in sample["groups"])
        wait_until(lambda: first_sample(feed, lag_shown), 60, f"{group}'s lag on broker 1")

        def rate_shown(sample: dict[str, Any]) -> bool:
            producer.produce(topic, value=b"y", partition=0)
            producer.poll(0)
            return any(t["name"] == topic and t["messages_in_per_second"] > 0
                       for t in sample["topics"])
        shown = wait_until(lambda: first_sample(feed, rate_shown), 60, "the rate on broker 1")
        assert producer.flush(30) == 0
        [row] = [p for p in shown["partitions"] if p["topic"] == topic]
        assert (row["leader"], row["replicas"], row["size_bytes"]) == (2, [2, 3], None)
        assert row["high_watermark"] >= 30

        cluster.brokers[3].stop()

        def three_down(sample: dict[str, Any]) -> bool:
            return {b["node_id"]: b.get("state") for b in (sample["cluster"] or {}).get("brokers", [])} == {
                1: "alive", 2: "alive", 3: "down"}
        wait_until(lambda: first_sample(feed, three_down), 60, "broker 3 shown as down")
