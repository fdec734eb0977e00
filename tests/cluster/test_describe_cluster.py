"""DescribeCluster (60) v0-v1: confluent-kafka's and kafka-python's describe_cluster
against a real server, the endpoint type of v1 and v0's refusal of it, and the cluster's
authorized operations under ACLs (DESCRIBE on the cluster, as Kafka)."""

from __future__ import annotations

import pytest
from helpers.acl_broker import ADMIN, ALICE, BOB, allow, call, with_authorizer
from helpers.clienthelpers import kp_admin
from helpers.kafkaclient import BlockingClient

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import ApiVersionsRequest, DescribeClusterRequest
from kafkaproto.messages.metadata import AUTHORIZED_OPERATIONS_OMITTED
from logserver.broker import Broker
from logserver.handlers import describe_cluster
from logserver.security.acl import AclOperation, ResourceType

pytestmark = pytest.mark.timeout(120)

CLUSTER_OPERATIONS = {"ALTER", "ALTER_CONFIGS", "CLUSTER_ACTION", "CREATE", "DESCRIBE",
                      "DESCRIBE_CONFIGS", "IDEMPOTENT_WRITE"}


def _bits(operations: int) -> set[str]:
    return {op.name for op in AclOperation if op.value > 2 and operations & (1 << op.value)}


def test_confluent_kafka_describe_cluster(server):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    described = admin.describe_cluster(include_authorized_operations=True).result(15)
    assert described.cluster_id and len(described.cluster_id) == 22  # Kafka's base64 uuid
    assert [(n.id, n.host, n.port) for n in described.nodes] == [(1, "127.0.0.1", server.port)]
    assert described.controller.id == 1
    # no authorizer: everything Kafka defines on a cluster is allowed
    assert {op.name for op in described.authorized_operations} == CLUSTER_OPERATIONS
    plain = admin.describe_cluster().result(15)
    assert plain.authorized_operations is None and plain.cluster_id == described.cluster_id


def test_kafka_python_describe_cluster(server):
    admin = kp_admin(server.bootstrap)
    try:
        described = admin.describe_cluster()
    finally:
        admin.close()
    assert described["controller_id"] == 1
    assert [(b["broker_id"], b["host"], b["port"]) for b in described["brokers"]] == [
        (1, "127.0.0.1", server.port)]
    assert {str(op).rsplit(".", 1)[-1] for op in described["authorized_operations"]} == CLUSTER_OPERATIONS


def test_raw_versions_and_endpoint_types(server):
    client = BlockingClient(server.port)
    try:
        versions = client.call(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(
            client_software_name="tests", client_software_version="1"))
        advertised = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert advertised[ApiKey.DESCRIBE_CLUSTER] == (0, 1)
        v0 = client.call(ApiKey.DESCRIBE_CLUSTER, 0, DescribeClusterRequest(
            include_cluster_authorized_operations=False))
        assert (v0.error_code, v0.controller_id, [b.broker_id for b in v0.brokers]) == (0, 1, [1])
        assert v0.cluster_authorized_operations == AUTHORIZED_OPERATIONS_OMITTED
        v1 = client.call(ApiKey.DESCRIBE_CLUSTER, 1, DescribeClusterRequest(
            include_cluster_authorized_operations=True, endpoint_type=1))
        assert (v1.error_code, v1.endpoint_type, v1.cluster_id) == (0, 1, v0.cluster_id)
        assert _bits(v1.cluster_authorized_operations) == CLUSTER_OPERATIONS
        controllers = client.call(ApiKey.DESCRIBE_CLUSTER, 1, DescribeClusterRequest(
            include_cluster_authorized_operations=False, endpoint_type=2))
        assert controllers.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE
        assert controllers.brokers == []
    finally:
        client.close()


def test_authorized_operations_follow_the_acls() -> None:
    acls = [allow(ResourceType.CLUSTER, "kafka-cluster", AclOperation.DESCRIBE),
            allow(ResourceType.CLUSTER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE)]
    request = DescribeClusterRequest(include_cluster_authorized_operations=True, endpoint_type=1)

    async def scenario(broker: Broker) -> None:
        alice = await call(ALICE, describe_cluster.handle, broker, ApiKey.DESCRIBE_CLUSTER, 1, request)
        assert alice.error_code == ErrorCode.NONE
        assert _bits(alice.cluster_authorized_operations) == {"DESCRIBE", "IDEMPOTENT_WRITE"}
        # no DESCRIBE on the cluster: still described (as Kafka), no operations
        bob = await call(BOB, describe_cluster.handle, broker, ApiKey.DESCRIBE_CLUSTER, 1, request)
        assert (bob.error_code, bob.cluster_authorized_operations) == (ErrorCode.NONE, 0)
        assert [b.broker_id for b in bob.brokers] == [broker.node_id]
        admin = await call(ADMIN, describe_cluster.handle, broker, ApiKey.DESCRIBE_CLUSTER, 1, request)
        assert _bits(admin.cluster_authorized_operations) == CLUSTER_OPERATIONS

    with_authorizer(scenario, acls)


@pytest.mark.slow
def test_cluster_mode_lists_every_live_broker(tmp_path):
    from helpers.clusterprocs import Cluster, EtcdProcess

    etcd = EtcdProcess(tmp_path / "etcd-data")
    etcd.start()
    try:
        cluster = Cluster(tmp_path, etcd, 3)
        try:
            cluster.start()
            admin = cluster.admin()
            described = admin.describe_cluster().result(15)
            metadata = cluster.metadata()
            assert sorted(n.id for n in described.nodes) == [1, 2, 3]
            assert {n.id: n.port for n in described.nodes} == {
                n: b.port for n, b in cluster.brokers.items()}
            assert described.controller.id == metadata.controller_id
            assert described.cluster_id == metadata.cluster_id
        finally:
            cluster.stop()
    finally:
        etcd.stop()
