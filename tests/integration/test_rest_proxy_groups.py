"""REST Proxy consumer instances are members of their Kafka consumer group: a
kafka-python consumer in the same group and a REST instance split the partitions
(range assignor), ``logserver group describe`` shows both, and deleting the instance
hands its partitions to the Kafka consumer."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
from helpers.admin_cli import ok_json
from helpers.clienthelpers import KP_TIMEOUTS, create_topic
from helpers.serverproc import HOST, free_port
from helpers.waiting import wait_until

pytestmark = pytest.mark.timeout(120)

V2 = "application/vnd.kafka.v2+json"
JSON_V2 = "application/vnd.kafka.json.v2+json"




def post(s: requests.Session, url: str, body: Any, content_type: str = V2) -> requests.Response:
    return s.post(url, data=json.dumps(body), headers={"Content-Type": content_type}, timeout=30)


def test_rest_instance_and_kafka_consumer_share_one_group(server_factory, topic_name) -> None:
    from kafka import KafkaConsumer

    port = free_port()
    srv = server_factory(settings={"rest.proxy.listeners": f"http://{HOST}:{port}",
                                   "group.initial.rebalance.delay.ms": 0})
    rest = f"http://{HOST}:{port}"
    create_topic(srv.bootstrap, topic_name, 4)
    group = f"g-{topic_name}"
    with requests.Session() as s:
        post(s, f"{rest}/topics/{topic_name}",
             {"records": [{"value": i, "partition": i % 4} for i in range(8)]}, JSON_V2)
        created = post(s, f"{rest}/consumers/{group}", {"name": "rest-1", "format": "json",
                                                         "auto.offset.reset": "earliest"})
        uri = created.json()["base_uri"]
        assert post(s, f"{uri}/subscription", {"topics": [topic_name]}).status_code == 204

        def rest_partitions() -> list[int]:
            body = s.get(f"{uri}/assignments", timeout=30).json()
            return sorted(p["partition"] for p in body["partitions"])

        wait_until(lambda: rest_partitions() == [0, 1, 2, 3], what="the instance to own every partition", timeout=60.0)
        kc = KafkaConsumer(topic_name, bootstrap_servers=srv.bootstrap, group_id=group,
                           client_id="kp-member", auto_offset_reset="earliest",
                           enable_auto_commit=False, **KP_TIMEOUTS)
        try:
            def split() -> bool:
                kc.poll(timeout_ms=200)
                theirs = sorted(tp.partition for tp in kc.assignment())
                return len(theirs) == 2 and sorted(theirs + rest_partitions()) == [0, 1, 2, 3]

            wait_until(split, what="the REST instance and kafka-python to split the partitions", timeout=60.0)
            described = ok_json("group", "describe", group, "-b", srv.bootstrap)
            assert described["state"] == "Stable"
            members = {m["client_id"]: m for m in described["members"]}
            assert set(members) == {"rest-1", "kp-member"}
            assert sorted(members["rest-1"]["assignment"][topic_name]) == rest_partitions()
            # The instance reads only its own partitions, and commits as the member.
            mine = rest_partitions()
            got: list[dict[str, Any]] = []
            wait_until(lambda: got.extend(s.get(f"{uri}/records?timeout=500",
                                              headers={"Accept": JSON_V2}, timeout=30).json())
                     or len(got) >= 4, what="the instance's records", timeout=60.0)
            assert sorted(r["partition"] for r in got) == sorted(mine * 2)
            assert post(s, f"{uri}/offsets", None).status_code == 204
            # Deleting the instance: it leaves, kafka-python takes every partition.
            assert s.delete(uri, timeout=30).status_code == 204

            def all_theirs() -> bool:
                kc.poll(timeout_ms=200)
                return sorted(tp.partition for tp in kc.assignment()) == [0, 1, 2, 3]

            wait_until(all_theirs, what="kafka-python to take every partition", timeout=60.0)
            described = ok_json("group", "describe", group, "-b", srv.bootstrap)
            assert [m["client_id"] for m in described["members"]] == ["kp-member"]
            lags = {p["partition"]: p for p in described["partitions"]}
            assert all(lags[p]["current_offset"] == 2 for p in mine), lags
        finally:
            kc.close()
