"""The admin API's cluster-wide views on three real brokers and a real etcd: broker 1's
API lists a group that broker 2 coordinates, with its lag per partition from the
partition's leader; browses records of a partition led elsewhere, from an offset and
from a timestamp; and once broker 3 is stopped, lists it as down (not dropped) and the
partitions it held as under-replicated.

Offsets are committed with confluent-kafka's AdminClient; the coordinator is the one
FindCoordinator names.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic
from helpers.clienthelpers import kp_produce
from helpers.clusterprocs import Cluster
from helpers.group_offsets import COMMITTED, commit, group_on
from helpers.waiting import wait_until

pytestmark = pytest.mark.timeout(180)

TOPIC = "cluster-lag"
N = 30


def get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=20) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_broker_1_sees_broker_2s_group_lag_records_and_a_down_broker(cluster: Cluster) -> None:
    admin = cluster.admin()
    for future in admin.create_topics([NewTopic(TOPIC, 1, 3)]).values():
        future.result(timeout=30)
    sent = kp_produce(cluster.bootstrap, TOPIC, [
        {"key": f"k{i}".encode(), "value": json.dumps({"n": i}).encode(),
         "headers": [("h", b"\x00\xff")], "partition": 0} for i in range(N)])
    group = group_on(cluster, 2)
    wait_until(lambda: commit(admin, group, TOPIC), 60, f"{group}'s offset committed")

    one = cluster.brokers[1].admin_url

    def listed() -> dict[str, Any] | None:
        status, body = get(one + "/v1/groups")
        assert status == 200, body
        return next((g for g in body["groups"] if g["group_id"] == group), None)
    shown = wait_until(listed, 30, f"group {group} on broker 1's API")
    assert shown["coordinator"] == 2
    assert shown["partitions"] == [{"topic": TOPIC, "partition": 0,
                                    "committed_offset": COMMITTED, "high_watermark": N,
                                    "lag": N - COMMITTED}]
    assert shown["lag"] == N - COMMITTED

    # Records of the partition, read from its leader whichever it is.
    status, page = get(one + f"/v1/topics/{TOPIC}/records?partition=0&offset=5&limit=3")
    assert status == 200, page
    assert [r["offset"] for r in page["records"]] == [5, 6, 7]
    assert page["next_offset"] == 8 and page["high_watermark"] == N
    first = page["records"][0]
    assert first["key"] == {"size": 2, "format": "text", "truncated": False, "data": "k5"}
    assert first["value"]["format"] == "json" and json.loads(first["value"]["data"]) == {"n": 5}
    assert first["headers"] == [{"key": "h", "value": {
        "size": 2, "format": "hex", "truncated": False, "data": "00ff"}}]
    status, page = get(one + f"/v1/topics/{TOPIC}/records?partition=0"
                             f"&timestamp={sent[20].timestamp}&limit=1&max_value_bytes=4")
    assert status == 200, page
    [record] = page["records"]
    assert record["offset"] <= 20 and record["timestamp"] >= sent[20].timestamp
    assert record["value"]["truncated"] and record["value"]["data"] == '{"n"'

    # Broker 3 stops: listed as down, its partitions under-replicated.
    cluster.brokers[3].stop()

    def three_down() -> dict[str, Any] | None:
        status, body = get(one + "/v1/cluster")
        assert status == 200, body
        states = {b["node_id"]: b["state"] for b in body["brokers"]}
        return body if states == {1: "alive", 2: "alive", 3: "down"} else None
    body = wait_until(three_down, 60, "broker 3 listed as down")
    assert body["mode"] == "cluster"
    assert [b["controller"] for b in body["brokers"]].count(True) == 1
    down = next(b for b in body["brokers"] if b["node_id"] == 3)
    assert down["port"] == cluster.brokers[3].port  # seen before: its address kept

    def under_replicated() -> dict[str, Any] | None:
        status, body = get(one + "/v1/cluster/topics")
        assert status == 200, body
        topic = next(t for t in body["topics"] if t["name"] == TOPIC)
        return topic if topic["under_replicated_partitions"] == 1 else None
    topic = wait_until(under_replicated, 60, f"{TOPIC} under-replicated")
    [partition] = topic["partitions"]
    assert partition["offline_replicas"] == [3] and 3 not in partition["isr"]
    assert partition["high_watermark"] == N and topic["messages"] == N
    # The group is still listed with its lag while broker 3 is down.
    assert wait_until(listed, 30, "the group after broker 3 stopped")["lag"] == N - COMMITTED
