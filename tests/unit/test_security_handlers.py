"""Every handler's ACL check for named principals: decoded requests against a Broker on the
in-memory storage engine with the authorizer on (no sockets; the principal is set in the
request context as the dispatcher does). Real clients against a real server, with
User:ANONYMOUS, are in tests/integration/test_security_acls.py."""

from __future__ import annotations

import inspect

import pytest
from helpers.acl_broker import (
    ADMIN,
    ALICE,
    BOB,
    CAF,
    GAF,
    TAF,
    allow,
    call,
    topics_request,
    with_authorizer,
)

from kafkaproto import ApiKey, ErrorCode, encode_request
from kafkaproto.messages import (
    CreateAclsRequest,
    DeleteGroupsRequest,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    FetchRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    InitProducerIdRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    ProduceRequest,
    SyncGroupRequest,
)
from kafkaproto.records import build_batch
from logserver.broker import Broker
from logserver.dispatch import Dispatcher
from logserver.handlers import (
    create_acls,
    create_topics,
    delete_groups,
    delete_topics,
    describe_acls,
    describe_configs,
    describe_groups,
    fetch,
    find_coordinator,
    heartbeat,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    produce,
    sync_group,
)
from logserver.security.acl import (
    AclOperation,
    PatternType,
    ResourceType,
)
from logserver.security.listeners import ListenerSecurity
from logserver.security.session import ConnectionSecurity

pytestmark = pytest.mark.timeout(30)

Op = AclOperation


def produce_request(topic: str) -> ProduceRequest:
    batch = memoryview(bytearray(build_batch([(None, b"v", (), 1_000)])))
    return ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=batch)])])


def fetch_request(topic: str) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                        isolation_level=0, session_id=0, session_epoch=-1, topics=[
                            FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                                partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
                        forgotten_topics_data=[])


def list_offsets_request(topic: str) -> ListOffsetsRequest:
    return ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])])


def commit_request(group: str, topic: str) -> OffsetCommitRequest:
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                               group_instance_id=None, retention_time_ms=-1, topics=[
                                   OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
                                       OffsetCommitRequest.OffsetCommitRequestPartition(
                                           partition_index=0, committed_offset=1,
                                           committed_leader_epoch=-1, committed_metadata="")])])


def test_topic_apis_check_kafkas_operations() -> None:
    acls = [allow(ResourceType.TOPIC, "w", Op.WRITE), allow(ResourceType.TOPIC, "r", Op.READ),
            allow(ResourceType.TOPIC, "new-", Op.CREATE, PatternType.PREFIXED),
            allow(ResourceType.TOPIC, "new-", Op.DESCRIBE, PatternType.PREFIXED)]

    async def scenario(broker: Broker) -> None:
        created = await call(ADMIN, create_topics.handle, broker, ApiKey.CREATE_TOPICS, 7,
                             topics_request("w", "r", "x"))
        assert [t.error_code for t in created.topics] == [ErrorCode.NONE] * 3

        produced = await call(ALICE, produce.handle, broker, ApiKey.PRODUCE, 9, produce_request("w"))
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        produced = await call(ALICE, produce.handle, broker, ApiKey.PRODUCE, 9, produce_request("r"))
        assert produced.responses[0].partition_responses[0].error_code == TAF

        fetched = await call(ALICE, fetch.handle, broker, ApiKey.FETCH, 12, fetch_request("w"))
        assert (fetched.responses[0].partitions[0].error_code,
                fetched.responses[0].partitions[0].high_watermark) == (TAF, -1)
        fetched = await call(ALICE, fetch.handle, broker, ApiKey.FETCH, 12, fetch_request("r"))
        assert fetched.responses[0].partitions[0].error_code == ErrorCode.NONE

        for topic, error in (("r", ErrorCode.NONE), ("w", ErrorCode.NONE), ("x", TAF)):
            listed = await call(ALICE, list_offsets.handle, broker, ApiKey.LIST_OFFSETS, 7,
                                list_offsets_request(topic))
            assert listed.topics[0].partitions[0].error_code == error, topic

        everything = await call(ALICE, metadata.handle, broker, ApiKey.METADATA, 12,
                                MetadataRequest(topics=None, allow_auto_topic_creation=False))
        assert sorted(t.name for t in everything.topics) == ["r", "w"]  # implied DESCRIBE
        auto = await call(ALICE, metadata.handle, broker, ApiKey.METADATA, 9, MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in ("x", "ghost", "new-auto")],
            allow_auto_topic_creation=True))
        # Unknown and undescribable look alike; a describable new topic needs CREATE.
        assert [t.error_code for t in auto.topics] == [TAF, TAF, ErrorCode.NONE]
        assert broker.storage.partition_count("new-auto") == 1  # CREATE on new- suffices

        created = await call(ALICE, create_topics.handle, broker, ApiKey.CREATE_TOPICS, 7,
                             topics_request("other", "new-1"))
        other, new = created.topics
        assert other.error_code == TAF and broker.storage.partition_count("other") is None
        assert new.error_code == ErrorCode.NONE and new.configs == []
        assert new.topic_config_error_code == TAF  # no DESCRIBE_CONFIGS on it

        deleted = await call(ALICE, delete_topics.handle, broker, ApiKey.DELETE_TOPICS, 6,
                             DeleteTopicsRequest(topics=[
                                 DeleteTopicsRequest.DeleteTopicState(name=n, topic_id=bytes(16))
                                 for n in ("w", "ghost")], timeout_ms=5000))
        assert [r.error_code for r in deleted.responses] == [TAF, TAF]  # existence not revealed

        described = await call(ALICE, describe_configs.handle, broker, ApiKey.DESCRIBE_CONFIGS, 4,
                               DescribeConfigsRequest(resources=[
                                   DescribeConfigsRequest.DescribeConfigsResource(
                                       resource_type=rtype, resource_name=name, configuration_keys=None)
                                   for rtype, name in ((2, "r"), (4, "1"))]))
        assert [r.error_code for r in described.results] == [TAF, CAF]

        ids = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1,
                                    producer_id=-1, producer_epoch=-1)
        assert (await call(ALICE, init_producer_id.handle, broker, ApiKey.INIT_PRODUCER_ID, 4,
                           ids)).error_code == ErrorCode.NONE  # WRITE on some topic (KIP-679)
        assert (await call(BOB, init_producer_id.handle, broker, ApiKey.INIT_PRODUCER_ID, 4,
                           ids)).error_code == CAF

    with_authorizer(scenario, acls)


def test_group_apis_check_kafkas_operations() -> None:
    acls = [allow(ResourceType.GROUP, "g-read", Op.READ), allow(ResourceType.GROUP, "g-desc", Op.DESCRIBE),
            allow(ResourceType.GROUP, "g-del", Op.DELETE), allow(ResourceType.TOPIC, "t", Op.READ)]

    async def scenario(broker: Broker) -> None:
        await call(ADMIN, create_topics.handle, broker, ApiKey.CREATE_TOPICS, 7, topics_request("t", "x"))
        for group in ("g-read", "g-other", "g-del"):  # offsets committed by the admin
            done = await call(ADMIN, offset_commit.handle, broker, ApiKey.OFFSET_COMMIT, 8,
                              commit_request(group, "t"))
            assert done.topics[0].partitions[0].error_code == ErrorCode.NONE

        found = await call(ALICE, find_coordinator.handle, broker, ApiKey.FIND_COORDINATOR, 4,
                           FindCoordinatorRequest(key_type=0, coordinator_keys=["g-desc", "g-none"]))
        assert [c.error_code for c in found.coordinators] == [ErrorCode.NONE, GAF]
        found = await call(ALICE, find_coordinator.handle, broker, ApiKey.FIND_COORDINATOR, 3,
                           FindCoordinatorRequest(key="g-none", key_type=0))
        assert (found.error_code, found.node_id) == (GAF, -1)

        joined = await call(ALICE, join_group.handle, broker, ApiKey.JOIN_GROUP, 7,
                            JoinGroupRequest(group_id="g-desc", session_timeout_ms=10_000,
                                             member_id="", protocol_type="consumer", protocols=[]))
        assert joined.error_code == GAF  # DESCRIBE is not READ
        for handler, key, request in (
                (sync_group.handle, ApiKey.SYNC_GROUP, SyncGroupRequest(group_id="g-desc", member_id="m")),
                (heartbeat.handle, ApiKey.HEARTBEAT, HeartbeatRequest(group_id="g-desc", member_id="m")),
                (leave_group.handle, ApiKey.LEAVE_GROUP, LeaveGroupRequest(group_id="g-desc", members=[]))):
            assert (await call(ALICE, handler, broker, key, 3, request)).error_code == GAF, key

        committed = await call(ALICE, offset_commit.handle, broker, ApiKey.OFFSET_COMMIT, 8,
                               commit_request("g-read", "x"))
        assert committed.topics[0].partitions[0].error_code == TAF
        committed = await call(ALICE, offset_commit.handle, broker, ApiKey.OFFSET_COMMIT, 8,
                               commit_request("g-desc", "t"))
        assert committed.topics[0].partitions[0].error_code == GAF
        committed = await call(ALICE, offset_commit.handle, broker, ApiKey.OFFSET_COMMIT, 8,
                               commit_request("g-read", "t"))
        assert committed.topics[0].partitions[0].error_code == ErrorCode.NONE

        fetched = await call(ALICE, offset_fetch.handle, broker, ApiKey.OFFSET_FETCH, 7,
                             OffsetFetchRequest(group_id="g-desc", topics=[
                                 OffsetFetchRequest.OffsetFetchRequestTopic(name=n, partition_indexes=[0])
                                 for n in ("t", "x")]))
        errors = {t.name: t.partitions[0].error_code for t in fetched.topics}
        assert (fetched.error_code, errors) == (ErrorCode.NONE, {"t": ErrorCode.NONE, "x": TAF})
        fetched = await call(ALICE, offset_fetch.handle, broker, ApiKey.OFFSET_FETCH, 7,
                             OffsetFetchRequest(group_id="g-other", topics=None))
        assert fetched.error_code == GAF

        described = await call(ALICE, describe_groups.handle, broker, ApiKey.DESCRIBE_GROUPS, 5,
                               DescribeGroupsRequest(groups=["g-read", "g-other"],
                                                     include_authorized_operations=True))
        read, other = described.groups
        assert read.error_code == ErrorCode.NONE
        assert read.authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)
        assert other.error_code == GAF

        listed = await call(ALICE, list_groups.handle, broker, ApiKey.LIST_GROUPS, 4,
                            ListGroupsRequest(states_filter=[]))
        assert sorted(g.group_id for g in listed.groups) == ["g-del", "g-read"]
        listed = await call(ADMIN, list_groups.handle, broker, ApiKey.LIST_GROUPS, 4,
                            ListGroupsRequest(states_filter=[]))
        assert sorted(g.group_id for g in listed.groups) == ["g-del", "g-other", "g-read"]

        deleted = await call(ALICE, delete_groups.handle, broker, ApiKey.DELETE_GROUPS, 2,
                             DeleteGroupsRequest(groups_names=["g-read"]))
        assert [(r.group_id, r.error_code) for r in deleted.results] == [("g-read", GAF)]
        dropped = await call(ALICE, offset_delete.handle, broker, ApiKey.OFFSET_DELETE, 0,
                             OffsetDeleteRequest(group_id="g-read", topics=[]))
        assert dropped.error_code == GAF
        dropped = await call(ALICE, offset_delete.handle, broker, ApiKey.OFFSET_DELETE, 0,
                             OffsetDeleteRequest(group_id="g-del", topics=[
                                 OffsetDeleteRequest.OffsetDeleteRequestTopic(name=n, partitions=[
                                     OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])
                                 for n in ("t", "x")]))
        assert dropped.error_code == ErrorCode.NONE
        assert {t.name: t.partitions[0].error_code for t in dropped.topics} == {
            "t": ErrorCode.NONE, "x": TAF}

    with_authorizer(scenario, acls)


def test_acl_apis_need_cluster_alter_and_describe() -> None:
    async def scenario(broker: Broker) -> None:
        creation = CreateAclsRequest.AclCreation(
            resource_type=2, resource_name="t", resource_pattern_type=3, principal=BOB,
            host="*", operation=3, permission_type=3)
        refused = await call(ALICE, create_acls.handle, broker, ApiKey.CREATE_ACLS, 3,
                             CreateAclsRequest(creations=[creation]))
        assert [r.error_code for r in refused.results] == [CAF]
        query = DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None,
                                    pattern_type_filter=1, principal_filter=None, host_filter=None,
                                    operation=1, permission_type=1)
        assert (await call(ALICE, describe_acls.handle, broker, ApiKey.DESCRIBE_ACLS, 3,
                           query)).error_code == CAF
        # DESCRIBE on the cluster (implied by ALTER) lets alice see the ACLs.
        assert broker.authorizer is not None
        broker.authorizer.replace(frozenset({allow(ResourceType.CLUSTER, "kafka-cluster", Op.ALTER)}))
        seen = await call(ALICE, describe_acls.handle, broker, ApiKey.DESCRIBE_ACLS, 3, query)
        assert seen.error_code == ErrorCode.NONE
        assert [(r.resource_type, r.resource_name) for r in seen.resources] == [(4, "kafka-cluster")]

    with_authorizer(scenario, [])


def test_the_dispatcher_hands_the_connections_principal_to_the_checks() -> None:
    """The principal of the connection's security (what SASL or a client certificate
    established) is what the rules see."""
    async def scenario(broker: Broker) -> None:
        await call(ADMIN, create_topics.handle, broker, ApiKey.CREATE_TOPICS, 7, topics_request("w"))
        frame = bytearray(encode_request(ApiKey.PRODUCE, 9, 7, "unit", produce_request("w"))[4:])
        errors = {}
        for principal in (ALICE, BOB):
            security = ConnectionSecurity(ListenerSecurity(name="PLAINTEXT", protocol="PLAINTEXT"))
            security.principal = principal
            outcome = Dispatcher(broker).dispatch(bytearray(frame), "127.0.0.1:5000", security)
            assert outcome is not None and outcome[0] is not None
            result = outcome[1]
            response = await result if inspect.isawaitable(result) else result
            errors[principal] = response.responses[0].partition_responses[0].error_code
        assert errors == {ALICE: ErrorCode.NONE, BOB: TAF}

    with_authorizer(scenario, [allow(ResourceType.TOPIC, "w", Op.WRITE)])
