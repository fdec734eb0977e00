"""One control plane, two modes (issue 22): each control API runs through the same test
body against one server and against a 3-broker cluster over etcd (``log_bootstrap``).

The handlers (logserver/handlers/) do ACLs, validation and responses once and ask
``broker.control`` (logserver/control: local, or logserver/cluster/control.py over etcd);
what may differ between the modes is only what the cluster is: how many brokers, who
leads, the default replication factor (1 on one node, 3 in this cluster). The rest is
asserted alike: a topic named twice in one CreateTopics, Metadata by an unknown topic id
before v12, the authorized-operations bits Metadata v8+ answers when asked, and the
refusals of CreatePartitions, the reassignment APIs and DeleteTopics.
"""

from __future__ import annotations

import uuid

import pytest
from helpers.kafkaclient import BlockingClient
from helpers.waiting import wait_until

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import (
    AlterPartitionReassignmentsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    FindCoordinatorRequest,
    ListPartitionReassignmentsRequest,
    MetadataRequest,
)
from kafkaproto.messages.metadata import AUTHORIZED_OPERATIONS_OMITTED

pytestmark = pytest.mark.timeout(180)

Topic = CreateTopicsRequest.CreatableTopic
Wanted = MetadataRequest.MetadataRequestTopic


def _client(bootstrap: str) -> BlockingClient:
    return BlockingClient(int(bootstrap.split(",")[0].rsplit(":", 1)[1]), timeout=60)


def _metadata(client: BlockingClient, names: list[str] | None, *, auto_create: bool = False,
              version: int = 12, operations: bool = False):
    topics = None if names is None else [Wanted(name=n, topic_id=bytes(16)) for n in names]
    return client.call(ApiKey.METADATA, version, MetadataRequest(
        topics=topics, allow_auto_topic_creation=auto_create,
        include_topic_authorized_operations=operations))


def _create(client: BlockingClient, topics: list[Topic], *, validate_only: bool = False):
    response = client.call(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(
        topics=topics, timeout_ms=30_000, validate_only=validate_only))
    return [(t.name, t.error_code, t.num_partitions, t.replication_factor) for t in response.topics]


def _topic(name: str, partitions: int = 2, replication_factor: int = -1) -> Topic:
    return Topic(name=name, num_partitions=partitions, replication_factor=replication_factor,
                 assignments=[], configs=[])


def _grow(client: BlockingClient, *topics: tuple[str, int]) -> list[int]:
    response = client.call(ApiKey.CREATE_PARTITIONS, 3, CreatePartitionsRequest(
        topics=[CreatePartitionsRequest.CreatePartitionsTopic(name=n, count=c, assignments=None)
                for n, c in topics], timeout_ms=30_000, validate_only=False))
    return [r.error_code for r in response.results]


def test_control_apis_answer_alike_in_both_modes(log_bootstrap: str) -> None:
    client = _client(log_bootstrap)
    try:
        _scenario(client)
    finally:
        client.close()


def _scenario(client: BlockingClient) -> None:
    tag = uuid.uuid4().hex[:8]
    # -- Metadata and DescribeCluster: the brokers, the controller, the cluster id
    about = _metadata(client, None)
    brokers = {b.node_id for b in about.brokers}
    assert len(brokers) in (1, 3) and about.controller_id in brokers and about.cluster_id
    described = client.call(ApiKey.DESCRIBE_CLUSTER, 1, DescribeClusterRequest(
        include_cluster_authorized_operations=False, endpoint_type=1))
    assert described.error_code == ErrorCode.NONE
    assert {b.broker_id for b in described.brokers} == brokers
    assert (described.cluster_id, described.controller_id) == (about.cluster_id, about.controller_id)
    rf = len(brokers)  # the default: 1 on one node, default.replication.factor 3 here

    # -- CreateTopics: the checks, the default replication factor, validate_only
    name, twice = f"ctl-{tag}", f"ctl-twice-{tag}"
    assert _create(client, [_topic(name)]) == [(name, ErrorCode.NONE, 2, rf)]
    assert _create(client, [_topic(name)])[0][1] == ErrorCode.TOPIC_ALREADY_EXISTS
    assert [r[1] for r in _create(client, [_topic(twice), _topic(twice)])] == \
        [ErrorCode.INVALID_REQUEST] * 2
    assert _create(client, [_topic("bad/name")])[0][1] == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert _create(client, [_topic(f"ctl-rf-{tag}", 1, rf + 1)])[0][1] == \
        ErrorCode.INVALID_REPLICATION_FACTOR
    assert _create(client, [_topic(f"ctl-p0-{tag}", 0)])[0][1] == ErrorCode.INVALID_PARTITIONS
    probe = f"ctl-probe-{tag}"
    assert _create(client, [_topic(probe, 4)], validate_only=True) == [(probe, ErrorCode.NONE, 4, rf)]
    assert [t.error_code for t in _metadata(client, [probe, twice]).topics] == \
        [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 2

    # -- Metadata of the topic: partitions, leaders among the brokers, replicas; the
    # authorized operations when asked (no authorizer: every topic operation)
    described_topic = _metadata(client, [name], version=10, operations=True).topics[0]
    assert described_topic.error_code == ErrorCode.NONE
    assert described_topic.topic_authorized_operations not in (AUTHORIZED_OPERATIONS_OMITTED, 0)
    assert [p.partition_index for p in described_topic.partitions] == [0, 1]
    assert all(p.leader_id in brokers and len(p.replica_nodes) == rf
               for p in described_topic.partitions)
    topic_id = described_topic.topic_id
    unknown_id = uuid.uuid4().bytes
    by_id = client.call(ApiKey.METADATA, 12, MetadataRequest(
        topics=[Wanted(name=None, topic_id=topic_id), Wanted(name=None, topic_id=unknown_id)],
        allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    assert [(t.name, t.error_code) for t in by_id.topics] == [
        (name, ErrorCode.NONE), (None, ErrorCode.UNKNOWN_TOPIC_ID)]
    old = client.call(ApiKey.METADATA, 10, MetadataRequest(
        topics=[Wanted(name=None, topic_id=unknown_id)], allow_auto_topic_creation=False,
        include_topic_authorized_operations=False))
    assert old.topics[0].error_code == ErrorCode.INVALID_REQUEST  # names not nullable before v12

    # -- auto-creation by Metadata
    auto = f"ctl-auto-{tag}"
    first = _metadata(client, [auto], auto_create=True).topics[0]
    assert first.error_code in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE)
    wait_until(lambda: _metadata(client, [auto]).topics[0].error_code == ErrorCode.NONE,
               timeout=30, what=f"auto-created {auto} in Metadata")

    # -- CreatePartitions
    assert _grow(client, (name, 3)) == [ErrorCode.NONE]
    assert len(_metadata(client, [name]).topics[0].partitions) == 3
    assert _grow(client, (name, 2)) == [ErrorCode.INVALID_PARTITIONS]
    assert _grow(client, (f"ctl-none-{tag}", 5)) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert _grow(client, (auto, 9), (auto, 9)) == [ErrorCode.INVALID_REQUEST] * 2

    # -- FindCoordinator: a group's and a transactional id's coordinator is a broker
    for key_type in (0, 1):
        def found(key_type: int = key_type):
            answer = client.call(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
                key_type=key_type, coordinator_keys=[f"g-{tag}", f"h-{tag}"]))
            ok = all(c.error_code == ErrorCode.NONE for c in answer.coordinators)
            return answer if ok else None
        answer = wait_until(found, timeout=60, what=f"coordinators of key type {key_type}")
        assert [c.key for c in answer.coordinators] == [f"g-{tag}", f"h-{tag}"]
        assert all(c.node_id in brokers and c.port > 0 for c in answer.coordinators)
    bad_type = client.call(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
        key_type=7, coordinator_keys=["k"]))
    assert bad_type.coordinators[0].error_code == ErrorCode.INVALID_REQUEST

    # -- the reassignment APIs: nothing under way, bad targets refused
    def alter(replicas: list[int] | None, topic: str = name) -> int:
        response = client.call(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, AlterPartitionReassignmentsRequest(
            timeout_ms=30_000, topics=[AlterPartitionReassignmentsRequest.ReassignableTopic(
                name=topic, partitions=[AlterPartitionReassignmentsRequest.ReassignablePartition(
                    partition_index=0, replicas=replicas)])]))
        assert response.error_code == ErrorCode.NONE
        return response.responses[0].partitions[0].error_code

    assert alter([max(brokers) + 100]) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert alter([]) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert alter(None) == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    assert alter([min(brokers)], f"ctl-none-{tag}") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    listed = client.call(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, ListPartitionReassignmentsRequest(
        timeout_ms=30_000, topics=None))
    assert (listed.error_code, listed.topics) == (ErrorCode.NONE, [])

    # -- DeleteTopics: by id and by name; unknown ids and names
    def delete(*states: tuple[str | None, bytes]) -> list[tuple[str | None, int]]:
        response = client.call(ApiKey.DELETE_TOPICS, 6, DeleteTopicsRequest(
            topics=[DeleteTopicsRequest.DeleteTopicState(name=n, topic_id=i) for n, i in states],
            timeout_ms=30_000))
        return [(r.name, r.error_code) for r in response.responses]

    assert delete((None, topic_id), (auto, bytes(16))) == [(name, ErrorCode.NONE), (auto, ErrorCode.NONE)]
    assert [t.error_code for t in _metadata(client, [name, auto]).topics] == \
        [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 2
    assert delete((None, topic_id), (name, bytes(16))) == [
        (None, ErrorCode.UNKNOWN_TOPIC_ID), (name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
