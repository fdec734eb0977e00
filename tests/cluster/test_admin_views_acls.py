"""The cluster-wide admin views with SASL and ACLs on, on three real brokers and a real
etcd, configured as a Kafka operator would: followers fetch on a PLAINTEXT inter-broker
listener as ``User:ANONYMOUS``, which is granted CLUSTER_ACTION on the cluster (what
replication needs) and nothing else; the administrator is a SASL super user; the person
reading the admin API is a SCRAM user with DESCRIBE on one group and its topic.

Broker 1's API asks every broker (ListGroups, DescribeGroups, OffsetFetch, ListOffsets)
on their inter-broker listener: they answer it as a broker, as Kafka's brokers are trusted
for inter-broker traffic, so the group shows with its lag without any DESCRIBE ACL for
the inter-broker principal. What the reader sees is still filtered by the reader's ACLs.
"""

from __future__ import annotations

import base64
import json
import urllib.request
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from helpers.clusterprocs import Cluster
from helpers.sasl_cluster import MECHANISM, add_sasl_listeners
from helpers.serverproc import HOST
from helpers.waiting import wait_until

pytestmark = pytest.mark.timeout(240)

USERS = {"admin": "admin-secret", "ops": "ops-secret"}
TOPIC, GROUP, N, COMMITTED = "watched", "watchers", 20, 5


@pytest.fixture
def secured(tmp_path, etcd):
    nodes = Cluster(tmp_path, etcd, 3, **{"default.replication.factor": 3})
    sasl_ports = add_sasl_listeners(nodes, "User:admin", USERS, **{"admin.require.auth": "true"})
    nodes.sasl_ports = sasl_ports  # type: ignore[attr-defined]
    try:
        yield nodes.start()
    finally:
        nodes.stop()


def sasl(cluster: Cluster, user: str) -> dict[str, object]:
    ports = cluster.sasl_ports  # type: ignore[attr-defined]
    return {"bootstrap.servers": ",".join(f"{HOST}:{p}" for p in ports.values()),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": MECHANISM,
            "sasl.username": user, "sasl.password": USERS[user]}


def allow(admin: AdminClient, principal: str, kind: Any, name: str, operation: Any) -> None:
    [future] = admin.create_acls([AclBinding(kind, name, ResourcePatternType.LITERAL,
                                             principal, "*", operation,
                                             AclPermissionType.ALLOW)]).values()
    future.result(timeout=30)


def get(url: str, user: str) -> Any:
    token = base64.b64encode(f"{user}:{USERS[user]}".encode()).decode()
    request = urllib.request.Request(url, headers={"Authorization": f"Basic {token}"})
    with urllib.request.urlopen(request, timeout=20) as response:
        return json.loads(response.read())


def groups_seen(url: str, user: str) -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = get(url + "/v1/groups", user)["groups"]
    return groups


def test_cluster_views_need_no_acl_for_the_inter_broker_principal(secured: Cluster) -> None:
    cluster = secured
    admin = AdminClient(sasl(cluster, "admin"))
    allow(admin, "User:ANONYMOUS", ResourceType.BROKER, "kafka-cluster",
          AclOperation.CLUSTER_ACTION)  # replication: what Kafka's followers need
    allow(admin, "User:ops", ResourceType.GROUP, GROUP, AclOperation.DESCRIBE)
    allow(admin, "User:ops", ResourceType.TOPIC, TOPIC, AclOperation.READ)
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(timeout=30)
    producer = Producer({**sasl(cluster, "admin"), "acks": "all"})
    for i in range(N):
        producer.produce(TOPIC, value=b"v%d" % i, partition=0)
    assert producer.flush(30) == 0

    def committed(group: str) -> bool:
        [future] = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            group, [TopicPartition(TOPIC, 0, COMMITTED)])]).values()
        [result] = future.result(timeout=30).topic_partitions
        return result.error is None
    for group_id in (GROUP, "not-for-ops"):
        wait_until(lambda g=group_id: committed(g), 60, f"{group_id}'s offset committed")

    def shown() -> dict[str, Any] | None:
        return next((g for g in groups_seen(cluster.brokers[1].admin_url, "ops")
                     if g["group_id"] == GROUP), None)
    group = wait_until(shown, 60, f"{GROUP} with its lag on broker 1's API")
    assert group["partitions"] == [{"topic": TOPIC, "partition": 0, "committed_offset": COMMITTED,
                                    "high_watermark": N, "lag": N - COMMITTED}]
    # The reader's own ACLs still apply: the administrator sees both groups, ops one.
    every = wait_until(lambda: {g["group_id"] for g in groups_seen(
        cluster.brokers[1].admin_url, "admin")} >= {GROUP, "not-for-ops"} or None, 60,
        "both groups for the administrator")
    assert every
    assert {g["group_id"] for g in groups_seen(cluster.brokers[1].admin_url, "ops")} == {GROUP}
    # Records from the leader, whichever broker it is (Fetch there as a broker).
    for node, broker in cluster.brokers.items():
        page = get(broker.admin_url + f"/v1/topics/{TOPIC}/records?partition=0&offset=3"
                                      "&limit=2&format=text", "ops")
        assert [(r["offset"], r["value"]["data"]) for r in page["records"]] == [
            (3, "v3"), (4, "v4")], node
