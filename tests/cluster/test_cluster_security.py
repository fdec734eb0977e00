"""SASL/SCRAM and ACLs in cluster mode: 3 real brokers on one real etcd (replication
factor 3, min.insync.replicas 2), each with a PLAINTEXT inter-broker listener (followers
fetch there, as User:ANONYMOUS, a super user as in Kafka's usual PLAINTEXT inter-broker
set-up) and a SASL_PLAINTEXT listener for clients, and confluent-kafka clients.

The Produce and Fetch handlers are the single-node ones, so a principal without WRITE or
READ is refused by whichever partition leader it reaches, and an allowed one produces
(acks=all, idempotent) and consumes. Metadata on the SASL listener advertises every
broker's SASL address (the listener the client came in on), not the inter-broker one.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from helpers.cluster_txn import read_to_ends
from helpers.clusterprocs import Cluster
from helpers.kafkaclient import BlockingClient
from helpers.sasl_cluster import MECHANISM, add_sasl_listeners
from helpers.serverproc import HOST
from helpers.waiting import wait_until

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import CreateAclsRequest
from logserver.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

USERS = {"alice": "alice-secret", "mallory": "mallory-secret"}
TOPIC = "secured"
@pytest.fixture
def secured(tmp_path, etcd):
    nodes = Cluster(tmp_path, etcd, 3, **{"min.insync.replicas": 2,
                                          "default.replication.factor": 3})
    sasl_ports = add_sasl_listeners(nodes, "User:ANONYMOUS", USERS)
    nodes.sasl_ports = sasl_ports  # type: ignore[attr-defined]
    try:
        yield nodes.start()
    finally:
        nodes.stop()


def grant(port: int, principal: str, resource_type: ResourceType, name: str,
          *operations: AclOperation) -> None:
    """CreateAcls through one broker (cluster-wide: the same ACL again changes nothing)."""
    client = BlockingClient(port)
    try:
        response = client.call(ApiKey.CREATE_ACLS, 3, CreateAclsRequest(creations=[
            CreateAclsRequest.AclCreation(
                resource_type=resource_type, resource_name=name,
                resource_pattern_type=PatternType.LITERAL, principal=principal, host="*",
                operation=operation, permission_type=AclPermissionType.ALLOW)
            for operation in operations]))
        assert [r.error_code for r in response.results] == [ErrorCode.NONE] * len(operations)
    finally:
        client.close()


def sasl_config(cluster: Cluster, user: str, nodes: list[int] | None = None) -> dict[str, object]:
    ports = cluster.sasl_ports  # type: ignore[attr-defined]
    chosen = sorted(ports) if nodes is None else nodes
    return {"bootstrap.servers": ",".join(f"{HOST}:{ports[n]}" for n in chosen),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": MECHANISM,
            "sasl.username": user, "sasl.password": USERS[user]}


def test_acls_apply_on_every_partition_leader_with_sasl_principals(secured):
    cluster = secured
    admin = cluster.admin()  # PLAINTEXT: the inter-broker listener's super user
    admin.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(timeout=20)
    admin.create_topics([NewTopic("hidden", 1, 3)])["hidden"].result(timeout=20)
    wait_until(lambda: all((p := cluster.partition(TOPIC, i)) is not None and len(p.isrs) == 3
                           for i in range(3)), 30, "the topic's replicas in sync")
    leaders = {i: cluster.partition(TOPIC, i).leader for i in range(3)}
    assert set(leaders.values()) == {1, 2, 3}  # each broker leads one partition
    for broker in cluster.brokers.values():
        grant(broker.port, "User:alice", ResourceType.TOPIC, TOPIC,
              AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE)
        grant(broker.port, "User:alice", ResourceType.GROUP, "alice-group", AclOperation.READ)
        # mallory may see the topic, so her requests reach the leaders, but not use it
        grant(broker.port, "User:mallory", ResourceType.TOPIC, TOPIC, AclOperation.DESCRIBE)

    # Clients on the SASL listener are told the brokers' SASL addresses.
    alice_admin_meta = Consumer({**sasl_config(cluster, "alice"), "group.id": "alice-group"})
    try:
        meta = alice_admin_meta.list_topics(TOPIC, timeout=20)
        assert {b.id: b.port for b in meta.brokers.values()} == cluster.sasl_ports  # type: ignore[attr-defined]
    finally:
        alice_admin_meta.close()

    # alice: acks=all, idempotent (InitProducerId allowed by WRITE on a topic), to every leader.
    failures: list[object] = []
    producer = Producer({**sasl_config(cluster, "alice"), "acks": "all", "enable.idempotence": True})
    values = [b"alice-%d" % i for i in range(30)]
    for i, value in enumerate(values):
        producer.produce(TOPIC, value=value, partition=i % 3,
                         on_delivery=lambda err, _msg: err is not None and failures.append(err))
    assert producer.flush(30) == 0
    assert failures == []
    consumer = Consumer({**sasl_config(cluster, "alice"), "group.id": "alice-group",
                         "enable.auto.commit": False})
    got: list[bytes] = []
    try:
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(3)])
        deadline = time.monotonic() + 60
        while len(got) < len(values):
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                got.append(message.value())
            assert time.monotonic() < deadline, f"read {len(got)} of {len(values)}"
    finally:
        consumer.close()
    assert sorted(got) == sorted(values)

    # mallory, bootstrapping from each broker in turn: every partition's leader refuses
    # her produce with TOPIC_AUTHORIZATION_FAILED.
    for node in sorted(cluster.brokers):
        errors: dict[int, int] = {}
        producer = Producer({**sasl_config(cluster, "mallory", [node]), "acks": "all",
                             "enable.idempotence": False, "message.timeout.ms": 20000})
        for partition in range(3):
            producer.produce(TOPIC, value=b"mallory", partition=partition,
                             on_delivery=lambda err, msg, seen=errors: seen.__setitem__(
                                 msg.partition(), err.code() if err is not None else 0))
        assert producer.flush(30) == 0
        assert errors == {p: KafkaError.TOPIC_AUTHORIZATION_FAILED for p in range(3)}, node
    # Metadata and CreateTopics (the cluster's own handlers) apply the same ACL rules:
    # "all topics" leaves out what she may not describe, naming it is refused, and
    # without CREATE she creates nothing.
    watcher = Consumer({**sasl_config(cluster, "mallory"), "group.id": "mallory-group"})
    try:
        listed = watcher.list_topics(timeout=20).topics
        assert TOPIC in listed and "hidden" not in listed
        named = watcher.list_topics("hidden", timeout=20).topics["hidden"]
        assert named.error is not None and named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        watcher.close()
    mallory_admin = AdminClient(sasl_config(cluster, "mallory"))  # alive until answered
    creating = mallory_admin.create_topics([NewTopic("hers", 1, 3)])
    with pytest.raises(KafkaException) as refused_create:
        creating["hers"].result(timeout=20)
    assert refused_create.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "hers" not in cluster.metadata().topics
    # ... and her fetches the same; nothing she sent was stored.
    consumer = Consumer({**sasl_config(cluster, "mallory"), "group.id": "mallory-group",
                         "enable.auto.commit": False})
    refused: set[int] = set()
    try:
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(3)])
        deadline = time.monotonic() + 60
        while not refused:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is not None, f"mallory read {message.value()!r}"
                if message.error().code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                    refused.add(message.error().code())
            assert time.monotonic() < deadline, "no TOPIC_AUTHORIZATION_FAILED for mallory's fetch"
    finally:
        consumer.close()
    assert sorted(_read_as(cluster, "alice")) == sorted(values)


def _read_as(cluster: Cluster, user: str) -> list[bytes]:
    """Everything in the topic, read again by ``user`` to each partition's end."""
    return read_to_ends({**sasl_config(cluster, user), "group.id": f"{user}-group"}, TOPIC, range(3))
