"""The REST Proxy in a 3-broker cluster is a client of the whole cluster, as Confluent's
is (docs/rest-proxy.md, cluster mode): a consumer instance on a broker that does not
coordinate its group joins, reads every partition (most led by other brokers, which this
one holds no replica of), commits where a kafka-python consumer of the group sees it; a
by-offset read and a read_committed instance of a partition led elsewhere get its records
(aborted ones hidden)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from helpers.clienthelpers import KP_TIMEOUTS, create_topic, kp_produce
from helpers.clusterprocs import Cluster
from helpers.kafkaclient import BlockingClient
from helpers.serverproc import HOST, free_port
from helpers.waiting import wait_until

from kafkaproto import ApiKey
from kafkaproto.messages import FindCoordinatorRequest

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

V2 = "application/vnd.kafka.v2+json"
JSON_V2 = "application/vnd.kafka.json.v2+json"
BINARY_V2 = "application/vnd.kafka.binary.v2+json"
PARTITIONS = 6


def post(s: requests.Session, url: str, body: Any, content_type: str = V2) -> requests.Response:
    return s.post(url, data=json.dumps(body), headers={"Content-Type": content_type}, timeout=60)


@pytest.fixture
def rest_cluster(tmp_path, etcd) -> Iterator[tuple[Cluster, dict[int, str]]]:
    """Three brokers, each with the REST Proxy; ``rest[node]`` is node's URL."""
    nodes = Cluster(tmp_path, etcd, 3, **{"group.initial.rebalance.delay.ms": 0})
    rest = {}
    for node, broker in nodes.brokers.items():
        rest[node] = f"http://{HOST}:{free_port()}"
        broker.settings["rest.proxy.listeners"] = rest[node]
    try:
        nodes.start()
        yield nodes, rest
    finally:
        nodes.stop()


def coordinator(port: int, group: str) -> int:
    client = BlockingClient(port, timeout=20)
    try:
        answer = client.call(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key=group, key_type=0))
    finally:
        client.close()
    return answer.node_id if answer.error_code == 0 else -1


def placed(rest: dict[int, str], topic: str, partitions: int) -> dict[int, int]:
    """Partition -> leader once every partition has one that serves its reads."""
    def leaders() -> dict[int, int] | None:
        response = requests.get(f"{rest[1]}/topics/{topic}/partitions", timeout=30)
        found = {p["partition"]: p["leader"] for p in response.json()} if response.ok else {}
        return found if len(found) == partitions and -1 not in found.values() else None

    found = wait_until(leaders, what="leaders of every partition")

    def serving() -> bool:
        return all(requests.get(f"{rest[n]}/topics/{topic}/partitions/{p}/records?offset=0"
                                "&timeout=0", timeout=30).status_code == 200
                   for p, n in found.items())

    wait_until(serving, what="leaders serving their partitions")
    return found


def test_instance_off_the_coordinator_reads_every_partition_and_commits(rest_cluster, topic_name) -> None:
    from kafka import KafkaConsumer, TopicPartition

    nodes, rest = rest_cluster
    create_topic(nodes.bootstrap, topic_name, PARTITIONS)
    leaders = placed(rest, topic_name, PARTITIONS)
    assert set(leaders.values()) == {1, 2, 3}
    group = f"g-{topic_name}"
    coord = wait_until(lambda: coordinator(nodes.brokers[1].port, group) + 1,
                       what="the group's coordinator") - 1
    asker = next(n for n in (1, 2, 3) if n != coord)
    with requests.Session() as s:
        sent = post(s, f"{rest[coord]}/topics/{topic_name}", {"records": [
            {"value": f"v{p}-{i}", "partition": p} for p in range(PARTITIONS) for i in range(2)]},
            JSON_V2)
        assert sent.status_code == 200 and all(o["error_code"] is None
                                               for o in sent.json()["offsets"]), sent.text
        # By offset, through a broker that does not lead the partition.
        far = next(p for p, n in leaders.items() if n != asker)
        by_offset = s.get(f"{rest[asker]}/topics/{topic_name}/partitions/{far}/records"
                          "?offset=1&timeout=5000", headers={"Accept": JSON_V2}, timeout=60)
        assert by_offset.status_code == 200, by_offset.text
        assert [(r["partition"], r["offset"], r["value"]) for r in by_offset.json()] == [
            (far, 1, f"v{far}-1")]

        created = post(s, f"{rest[asker]}/consumers/{group}", {
            "name": "far-1", "format": "json", "auto.offset.reset": "earliest"})
        assert created.status_code == 200, created.text
        uri = created.json()["base_uri"]
        assert uri.startswith(rest[asker])
        assert post(s, f"{uri}/subscription", {"topics": [topic_name]}).status_code == 204

        def owned() -> list[int]:
            body = s.get(f"{uri}/assignments", timeout=60).json()
            return sorted(p["partition"] for p in body["partitions"])

        wait_until(lambda: owned() == list(range(PARTITIONS)), what="the instance to own every partition", timeout=60.0)
        got: list[dict[str, Any]] = []

        def read() -> bool:
            answer = s.get(f"{uri}/records?timeout=500", headers={"Accept": JSON_V2}, timeout=60)
            assert answer.status_code == 200, answer.text
            got.extend(answer.json())
            return len(got) >= 2 * PARTITIONS

        wait_until(read, timeout=60.0, what="every partition's records")
        assert sorted((r["partition"], r["offset"], r["value"]) for r in got) == sorted(
            (p, i, f"v{p}-{i}") for p in range(PARTITIONS) for i in range(2))
        assert post(s, f"{uri}/offsets", None).status_code == 204
        seen = s.get(f"{uri}/offsets", data=json.dumps({"partitions": [
            {"topic": topic_name, "partition": p} for p in range(PARTITIONS)]}),
            headers={"Content-Type": V2}, timeout=60).json()["offsets"]
        assert sorted((o["partition"], o["offset"]) for o in seen) == [
            (p, 2) for p in range(PARTITIONS)]
        assert s.delete(uri, timeout=60).status_code == 204  # leaves the group on its coordinator

    kc = KafkaConsumer(bootstrap_servers=nodes.bootstrap, group_id=group,
                       enable_auto_commit=False, **KP_TIMEOUTS)
    try:
        committed = {p: kc.committed(TopicPartition(topic_name, p)) for p in range(PARTITIONS)}
    finally:
        kc.close()
    assert committed == dict.fromkeys(range(PARTITIONS), 2)


def test_read_committed_of_a_partition_led_elsewhere_hides_aborted(rest_cluster, topic_name) -> None:
    from confluent_kafka import Producer

    nodes, rest = rest_cluster
    create_topic(nodes.bootstrap, topic_name, 1)
    leader = placed(rest, topic_name, 1)[0]
    asker = next(n for n in (1, 2, 3) if n != leader)
    producer = Producer({"bootstrap.servers": nodes.bootstrap, "transactional.id": f"tx-{topic_name}",
                         "linger.ms": 0})
    producer.init_transactions(60)
    for values, commit in (([b"a1", b"a2"], False), ([b"c1"], True), ([b"a3"], False)):
        producer.begin_transaction()
        for value in values:
            producer.produce(topic_name, value=value, partition=0)
        assert producer.flush(30) == 0
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    kp_produce(nodes.bootstrap, topic_name, [{"value": b"p1", "partition": 0}])
    tp = {"topic": topic_name, "partition": 0}
    with requests.Session() as s:
        created = post(s, f"{rest[asker]}/consumers/g-{topic_name}", {
            "name": "rc", "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
        assert created.status_code == 200, created.text
        uri = created.json()["base_uri"]
        assert post(s, f"{uri}/assignments", {"partitions": [tp]}).status_code == 204
        taken: list[bytes] = []

        def take() -> bool:
            answer = s.get(f"{uri}/records?timeout=500", headers={"Accept": BINARY_V2}, timeout=60)
            assert answer.status_code == 200, answer.text
            taken.extend(base64.b64decode(r["value"]) for r in answer.json())
            return len(taken) >= 2

        wait_until(take, what="the committed records")
        # The end is a seek to the leader's last stable offset: nothing more to read.
        assert post(s, f"{uri}/positions/end", {"partitions": [tp]}).status_code == 204
        assert s.get(f"{uri}/records?timeout=0", headers={"Accept": BINARY_V2},
                     timeout=60).json() == []
    assert taken == [b"c1", b"p1"]
