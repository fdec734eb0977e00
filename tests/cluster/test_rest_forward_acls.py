"""A REST produce sent on by a broker that does not lead the partition is authorised on
the leader as the REST caller, as Confluent's REST Proxy produces as its caller
(docs/security.md, docs/rest-proxy.md): three real brokers with SASL and ACLs on a real
etcd, set up as a Kafka operator would. The inter-broker principal (``User:ANONYMOUS``
on the PLAINTEXT inter-broker listener) has CLUSTER_ACTION, what replication needs, and
no WRITE on the topic: a caller with WRITE produces through any broker, one without is
refused with 403 (Kafka's TOPIC_AUTHORIZATION_FAILED), and a broker without
CLUSTER_ACTION cannot pass a request off as someone else's.
"""

from __future__ import annotations

import json
from typing import Any

import confluent_kafka.admin as ka
import pytest
import requests
from confluent_kafka import TopicPartition
from helpers.clusterprocs import Cluster
from helpers.kafkaclient import BlockingClient
from helpers.sasl_cluster import MECHANISM, add_sasl_listeners
from helpers.serverproc import HOST, free_port
from helpers.waiting import wait_until

from kafkaproto import ApiKey, ErrorCode, encode_request
from kafkaproto.messages import EnvelopeRequest, ProduceRequest

pytestmark = pytest.mark.timeout(240)

USERS = {"admin": "admin-secret", "writer": "writer-secret", "reader": "reader-secret"}
TOPIC = "forwarded"
V2 = "application/vnd.kafka.v2+json"
BINARY_V2 = "application/vnd.kafka.binary.v2+json"


@pytest.fixture
def secured(tmp_path, etcd):
    nodes = Cluster(tmp_path, etcd, 3, **{"default.replication.factor": 3})
    rest = {node: f"http://{HOST}:{free_port()}" for node in nodes.brokers}
    sasl_ports = add_sasl_listeners(nodes, "User:admin", USERS)
    for node, broker in nodes.brokers.items():
        broker.settings["rest.proxy.listeners"] = rest[node]
    nodes.rest = rest  # type: ignore[attr-defined]
    nodes.sasl_ports = sasl_ports  # type: ignore[attr-defined]
    try:
        yield nodes.start()
    finally:
        nodes.stop()


def admin_client(cluster: Cluster) -> ka.AdminClient:
    ports = cluster.sasl_ports  # type: ignore[attr-defined]
    return ka.AdminClient({"bootstrap.servers": ",".join(f"{HOST}:{p}" for p in ports.values()),
                        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": MECHANISM,
                        "sasl.username": "admin", "sasl.password": USERS["admin"]})


def allow(admin: ka.AdminClient, principal: str, kind: Any, name: str, operation: Any) -> None:
    [future] = admin.create_acls([ka.AclBinding(kind, name, ka.ResourcePatternType.LITERAL,
                                             principal, "*", operation,
                                             ka.AclPermissionType.ALLOW)]).values()
    future.result(timeout=30)


def produce(url: str, user: str, values: list[str]) -> requests.Response:
    body = {"records": [{"value": v, "partition": 0} for v in values]}
    return requests.post(f"{url}/topics/{TOPIC}", data=json.dumps(body),
                         headers={"Content-Type": BINARY_V2, "Accept": V2},
                         auth=(user, USERS[user]), timeout=60)


def test_forwarded_produce_is_authorised_as_the_rest_caller(secured: Cluster) -> None:
    cluster = secured
    rest: dict[int, str] = cluster.rest  # type: ignore[attr-defined]
    # Before the inter-broker principal has CLUSTER_ACTION, an Envelope from it (claiming
    # to carry the super user's request) is refused, never run.
    inner = encode_request(ApiKey.PRODUCE, 9, 1, "forger", ProduceRequest(
        transactional_id=None, acks=-1, timeout_ms=1000, topic_data=[]))[4:]
    client = BlockingClient(cluster.brokers[1].port, timeout=20)
    try:
        refused = client.call(ApiKey.ENVELOPE, 0, EnvelopeRequest(
            request_data=inner, request_principal=b"User:admin",
            client_host_address=bytes([127, 0, 0, 1])))
    finally:
        client.close()
    assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert refused.response_data is None

    admin = admin_client(cluster)
    allow(admin, "User:ANONYMOUS", ka.ResourceType.BROKER, "kafka-cluster",
          ka.AclOperation.CLUSTER_ACTION)  # replication, and what an Envelope needs
    allow(admin, "User:writer", ka.ResourceType.TOPIC, TOPIC, ka.AclOperation.WRITE)
    allow(admin, "User:reader", ka.ResourceType.TOPIC, TOPIC, ka.AclOperation.DESCRIBE)
    admin.create_topics([ka.NewTopic(TOPIC, 1, 3)])[TOPIC].result(timeout=30)
    wait_until(lambda: (p := cluster.partition(TOPIC, 0)) is not None and len(p.isrs) == 3,
               60, "3 in-sync replicas")
    leader = cluster.partition(TOPIC, 0).leader
    via = next(node for node in sorted(rest) if node != leader)
    # The inter-broker principal has no WRITE (nor any other ACL but CLUSTER_ACTION).
    bindings = admin.describe_acls(ka.AclBindingFilter(
        ka.ResourceType.ANY, None, ka.ResourcePatternType.ANY, "User:ANONYMOUS", None,
        ka.AclOperation.ANY, ka.AclPermissionType.ANY)).result(timeout=30)
    assert [(b.restype, b.operation) for b in bindings] == [
        (ka.ResourceType.BROKER, ka.AclOperation.CLUSTER_ACTION)]

    def written() -> dict[str, Any] | None:
        """The answer once every record has an offset (until the ACLs and the new
        partition's leader have reached broker ``via``: 403, or NOT_LEADER_OR_FOLLOWER
        per record, which a Kafka producer retries too)."""
        response = produce(rest[via], "writer", ["AQ==", "Ag==", "Aw=="])
        if response.status_code != 200:
            return None
        answer: dict[str, Any] = response.json()
        return answer if all(o["error_code"] is None for o in answer["offsets"]) else None
    answer = wait_until(written, 60, f"writer's produce through broker {via} "
                                     f"(leader {leader})")
    offsets = answer["offsets"]
    assert [o["error_code"] for o in offsets] == [None, None, None], offsets
    first = offsets[0]["offset"]
    assert [o["offset"] for o in offsets] == [first, first + 1, first + 2]

    # The leader holds them: its high watermark (ListOffsets goes to the leader) covers them.
    [future] = admin.list_offsets({TopicPartition(TOPIC, 0): ka.OffsetSpec.latest()}).values()
    assert future.result(timeout=30).offset >= first + 3

    refused_write = produce(rest[via], "reader", ["BA=="])
    assert refused_write.status_code == 403, refused_write.text
    assert refused_write.json()["error_code"] == 40301
