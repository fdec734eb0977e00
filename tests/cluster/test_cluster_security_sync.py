"""Cluster-wide SCRAM users and ACLs (etcd): made through one broker, in force on every
broker, and on a broker restarted later. 3 real brokers on one real etcd, each with a
PLAINTEXT listener (User:ANONYMOUS, a super user, administers) and a SASL_PLAINTEXT one;
confluent-kafka's AdminClient makes the changes, its consumers log in to one broker each.
No user exists in any data directory: carol only exists in etcd.
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from helpers.clusterprocs import Cluster
from helpers.sasl_cluster import (
    MECHANISM,
    etcd_value,
)
from helpers.serverproc import HOST
from helpers.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def describe_as(cluster: Cluster, node: int, user: str, password: str, topic: str) -> int:
    """Log in to broker ``node`` only and ask Metadata for ``topic``: its error code (0:
    described). Raises KafkaException when the login fails."""
    port = cluster.sasl_ports[node]  # type: ignore[attr-defined]
    consumer = Consumer({"bootstrap.servers": f"{HOST}:{port}", "group.id": "probe",
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": MECHANISM,
                         "sasl.username": user, "sasl.password": password})
    try:
        found = consumer.list_topics(topic, timeout=15).topics[topic]
        return 0 if found.error is None else int(found.error.code())
    finally:
        consumer.close()


def broker_admin(cluster: Cluster, node: int) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.brokers[node].bootstrap})


def test_scram_users_and_acls_made_on_one_broker_hold_on_every_broker(secured):
    cluster = secured
    admin = broker_admin(cluster, 1)
    for topic in ("shared", "hidden"):
        admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(timeout=30)
    upsert = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"carol-pw")])
    assert upsert["carol"].result(30) is None
    binding = AclBinding(ResourceType.TOPIC, "shared", ResourcePatternType.LITERAL,
                         "User:carol", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    assert admin.create_acls([binding])[binding].result(30) is None

    # etcd holds salted hashes, never the password.
    stored = json.loads(etcd_value(cluster, "scram_credentials"))
    assert list(stored["users"]) == ["carol"] and b"carol-pw" not in etcd_value(
        cluster, "scram_credentials")

    def everywhere(expected: dict[str, int], nodes: list[int]) -> None:
        for node in nodes:
            got = {}
            for topic in expected:
                got[topic] = describe_as(cluster, node, "carol", "carol-pw", topic)
            assert got == expected, f"broker {node}: {got}"

    refused = KafkaError.TOPIC_AUTHORIZATION_FAILED
    # The watch reaches every broker soon after the change; then each decides alone.
    wait_until(lambda: _quietly(everywhere, {"shared": 0, "hidden": refused}, [1, 2, 3]),
               30, "carol logged in and authorized on every broker")
    everywhere({"shared": 0, "hidden": refused}, [1, 2, 3])
    with pytest.raises(KafkaException):
        describe_as(cluster, 2, "carol", "wrong-pw", "shared")

    # A broker restarted later has them from etcd (nothing is in its data directory).
    cluster.brokers[3].restart()
    cluster.wait_for_brokers({1, 2, 3})
    assert not (cluster.brokers[3].data_dir / "__scram_credentials.json").exists()
    everywhere({"shared": 0, "hidden": refused}, [3])

    # Deleting the ACL through another broker takes it away on all of them.
    admin2 = broker_admin(cluster, 2)  # kept alive until answered
    deleted = admin2.delete_acls([AclBindingFilter(
        ResourceType.TOPIC, "shared", ResourcePatternType.LITERAL, "User:carol", "*",
        AclOperation.ANY, AclPermissionType.ANY)])
    assert len(next(iter(deleted.values())).result(30)) == 1
    # Each look logs in to three brokers (list_topics may take 15 s each on a loaded
    # machine): the wait allows a few looks, and a failure says what the last one saw.
    seen: list[str] = []
    try:
        wait_until(lambda: _quietly(everywhere, {"shared": refused}, [1, 2, 3], seen=seen), 90,
                   "the deleted ACL gone on every broker")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last look: {seen[-1:]}") from None


def _quietly(check, *args, seen: list[str] | None = None) -> bool:  # type: ignore[no-untyped-def]
    try:
        check(*args)
    except (AssertionError, KafkaException) as exc:
        if seen is not None:
            seen.append(repr(exc))
        return False
    return True
