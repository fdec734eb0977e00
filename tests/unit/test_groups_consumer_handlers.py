"""The KIP-848 handlers (ConsumerGroupHeartbeat, ConsumerGroupDescribe) and what they
change in the other group APIs, against a Broker on the in-memory storage engine with the
authorizer on (no sockets; the principal is set in the request context as the dispatcher
does): ACLs as JoinGroup's, topic ids on the wire, member epochs in OffsetCommit and
OffsetFetch v9, ListGroups v5 types, DescribeGroups' classic view, DeleteGroups, and a
classic JoinGroup refused by a live consumer group."""

from __future__ import annotations

import pytest
from helpers.acl_broker import ADMIN, ALICE, allow, call
from helpers.acl_broker import with_authorizer as run

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    CreateTopicsRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    JoinGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
)
from logserver.broker import Broker
from logserver.handlers import (
    consumer_group_describe,
    consumer_group_heartbeat,
    create_topics,
    delete_groups,
    describe_groups,
    join_group,
    list_groups,
    offset_commit,
    offset_delete,
    offset_fetch,
)
from logserver.security.acl import AclOperation, ResourceType

pytestmark = pytest.mark.timeout(30)

GAF, TAF = ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.TOPIC_AUTHORIZATION_FAILED


def heartbeat(group: str, member: str, epoch: int, topics: list[str] | None = None,
              owned: list[tuple[bytes, list[int]]] | None = None) -> ConsumerGroupHeartbeatRequest:
    tps = ConsumerGroupHeartbeatRequest.TopicPartitions
    return ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch,
        rebalance_timeout_ms=30_000 if epoch == 0 else -1, subscribed_topic_names=topics,
        topic_partitions=None if owned is None else [tps(topic_id=i, partitions=p)
                                                     for i, p in owned])


def commit(group: str, member: str, epoch: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=epoch,
                               member_id=member, group_instance_id=None, topics=[
                                   OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=[
                                       OffsetCommitRequest.OffsetCommitRequestPartition(
                                           partition_index=0, committed_offset=5,
                                           committed_leader_epoch=-1, committed_metadata="")])])


def fetch(group: str, member: str | None, epoch: int) -> OffsetFetchRequest:
    return OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
        group_id=group, member_id=member, member_epoch=epoch, topics=None)])


def test_consumer_group_apis_end_to_end_with_acls() -> None:
    acls = [allow(ResourceType.GROUP, "g", AclOperation.READ),
            allow(ResourceType.GROUP, "g-desc", AclOperation.DESCRIBE),
            allow(ResourceType.TOPIC, "t", AclOperation.DESCRIBE),
            allow(ResourceType.TOPIC, "t", AclOperation.READ)]

    async def scenario(broker: Broker) -> None:
        created = await call(ADMIN, create_topics.handle, broker, ApiKey.CREATE_TOPICS, 7,
                             CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
                                 name=n, num_partitions=2, replication_factor=1, assignments=[],
                                 configs=[]) for n in ("t", "x")], timeout_ms=5000))
        assert [t.error_code for t in created.topics] == [0, 0]
        t_id = broker.storage.topic_id("t")
        assert t_id is not None

        # ACLs: READ on the group, DESCRIBE on each subscribed topic
        hb = consumer_group_heartbeat.handle
        key = ApiKey.CONSUMER_GROUP_HEARTBEAT
        assert (await call(ALICE, hb, broker, key, 1, heartbeat("g-desc", "m1", 0, ["t"]))
                ).error_code == GAF
        assert (await call(ALICE, hb, broker, key, 1, heartbeat("g", "m1", 0, ["t", "x"]))
                ).error_code == TAF
        joined = await call(ALICE, hb, broker, key, 1, heartbeat("g", "m1", 0, ["t"]))
        assert (joined.error_code, joined.member_id, joined.member_epoch) == (0, "m1", 1)
        assert [(tp.topic_id, tp.partitions) for tp in joined.assignment.topic_partitions] == \
            [(t_id, [0, 1])]
        # v0: the coordinator names the member
        v0 = await call(ADMIN, hb, broker, key, 0, heartbeat("g0", "", 0, ["t"]))
        assert v0.error_code == 0 and v0.member_id
        # nothing changed: no assignment in the answer
        again = await call(ALICE, hb, broker, key, 1, heartbeat("g", "m1", 1, None, [(t_id, [0, 1])]))
        assert (again.error_code, again.member_epoch, again.assignment) == (0, 1, None)

        # OffsetCommit v9 / OffsetFetch v9 with the member epoch
        oc, of = offset_commit.handle, offset_fetch.handle
        ok = await call(ALICE, oc, broker, ApiKey.OFFSET_COMMIT, 9, commit("g", "m1", 1))
        assert ok.topics[0].partitions[0].error_code == ErrorCode.NONE
        stale = await call(ALICE, oc, broker, ApiKey.OFFSET_COMMIT, 9, commit("g", "m1", 0))
        assert stale.topics[0].partitions[0].error_code == ErrorCode.STALE_MEMBER_EPOCH
        old = await call(ALICE, oc, broker, ApiKey.OFFSET_COMMIT, 8, commit("g", "m1", 1))
        assert old.topics[0].partitions[0].error_code == ErrorCode.UNSUPPORTED_VERSION
        fetched = await call(ALICE, of, broker, ApiKey.OFFSET_FETCH, 9, fetch("g", "m1", 1))
        [group] = fetched.groups
        assert group.error_code == 0
        assert [(t.name, p.partition_index, p.committed_offset) for t in group.topics
                for p in t.partitions] == [("t", 0, 5)]
        fetched = await call(ALICE, of, broker, ApiKey.OFFSET_FETCH, 9, fetch("g", "m1", 7))
        assert fetched.groups[0].error_code == ErrorCode.STALE_MEMBER_EPOCH
        fetched = await call(ALICE, of, broker, ApiKey.OFFSET_FETCH, 9, fetch("g", None, -1))
        assert fetched.groups[0].error_code == 0  # an admin's fetch

        # ConsumerGroupDescribe: READ implies DESCRIBE; unknown groups are not found
        described = await call(ALICE, consumer_group_describe.handle, broker,
                               ApiKey.CONSUMER_GROUP_DESCRIBE, 1,
                               ConsumerGroupDescribeRequest(group_ids=["g", "g-other"]))
        mine, other = described.groups
        assert (mine.error_code, mine.group_state, mine.group_epoch, mine.assignment_epoch,
                mine.assignor_name) == (0, "Stable", 1, 1, "uniform")
        [member] = mine.members
        assert (member.member_id, member.member_epoch, member.subscribed_topic_names,
                member.member_type) == ("m1", 1, ["t"], 1)
        assert [(tp.topic_name, tp.topic_id, tp.partitions)
                for tp in member.assignment.topic_partitions] == [("t", t_id, [0, 1])]
        assert other.error_code == GAF
        missing = await call(ADMIN, consumer_group_describe.handle, broker,
                             ApiKey.CONSUMER_GROUP_DESCRIBE, 0,
                             ConsumerGroupDescribeRequest(group_ids=["nope"]))
        assert missing.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND

        # ListGroups v5: types
        listed = await call(ADMIN, list_groups.handle, broker, ApiKey.LIST_GROUPS, 5,
                            ListGroupsRequest(types_filter=["Consumer"]))
        assert sorted((g.group_id, g.group_type, g.group_state) for g in listed.groups) == [
            ("g", "consumer", "Stable"), ("g0", "consumer", "Stable")]
        listed = await call(ADMIN, list_groups.handle, broker, ApiKey.LIST_GROUPS, 5,
                            ListGroupsRequest(types_filter=["classic"]))
        assert listed.groups == []

        # DescribeGroups: the classic view
        classic = await call(ALICE, describe_groups.handle, broker, ApiKey.DESCRIBE_GROUPS, 5,
                             DescribeGroupsRequest(groups=["g"]))
        [view] = classic.groups
        assert (view.group_state, view.protocol_type, view.protocol_data) == \
            ("Stable", "consumer", "uniform")
        assert [m.member_id for m in view.members] == ["m1"]

        # a classic JoinGroup cannot take over a live consumer group
        join = await call(ADMIN, join_group.handle, broker, ApiKey.JOIN_GROUP, 5,
                          JoinGroupRequest(group_id="g", session_timeout_ms=10_000, member_id="",
                                           protocol_type="consumer", protocols=[
                                               JoinGroupRequest.JoinGroupRequestProtocol(
                                                   name="range", metadata=b"")]))
        assert join.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL

        # OffsetDelete: not for topics the live group subscribes to
        dropped = await call(ADMIN, offset_delete.handle, broker, ApiKey.OFFSET_DELETE, 0,
                             OffsetDeleteRequest(group_id="g", topics=[
                                 OffsetDeleteRequest.OffsetDeleteRequestTopic(name=n, partitions=[
                                     OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])
                                 for n in ("t", "x")]))
        assert dropped.error_code == ErrorCode.NONE
        assert {t.name: t.partitions[0].error_code for t in dropped.topics} == {
            "t": ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, "x": ErrorCode.NONE}

        # an empty consumer group without offsets goes with the offset expiry check
        left = await call(ADMIN, hb, broker, key, 0,
                          heartbeat("g0", v0.member_id, -1))
        assert left.error_code == 0
        broker.groups.expire_offsets()
        missing = await call(ADMIN, consumer_group_describe.handle, broker,
                             ApiKey.CONSUMER_GROUP_DESCRIBE, 0,
                             ConsumerGroupDescribeRequest(group_ids=["g0"]))
        assert missing.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND

        # DeleteGroups: only once empty
        deleted = await call(ADMIN, delete_groups.handle, broker, ApiKey.DELETE_GROUPS, 2,
                             DeleteGroupsRequest(groups_names=["g"]))
        assert deleted.results[0].error_code == ErrorCode.NON_EMPTY_GROUP
        left = await call(ALICE, hb, broker, key, 1, heartbeat("g", "m1", -1))
        assert (left.error_code, left.member_epoch) == (0, -1)
        deleted = await call(ADMIN, delete_groups.handle, broker, ApiKey.DELETE_GROUPS, 2,
                             DeleteGroupsRequest(groups_names=["g"]))
        assert deleted.results[0].error_code == ErrorCode.NONE
        missing = await call(ADMIN, consumer_group_describe.handle, broker,
                             ApiKey.CONSUMER_GROUP_DESCRIBE, 0,
                             ConsumerGroupDescribeRequest(group_ids=["g"]))
        assert missing.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND

    run(scenario, acls)


def test_offsets_of_subscribed_topics_do_not_expire_while_the_group_lives() -> None:
    async def scenario(broker: Broker) -> None:
        await call(ADMIN, create_topics.handle, broker, ApiKey.CREATE_TOPICS, 7,
                   CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
                       name=n, num_partitions=1, replication_factor=1, assignments=[],
                       configs=[]) for n in ("t", "x")], timeout_ms=5000))
        joined = await call(ADMIN, consumer_group_heartbeat.handle, broker,
                            ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, heartbeat("g", "m1", 0, ["t"]))
        assert joined.member_epoch == 1
        for topic in ("t", "x"):
            request = commit("g", "m1", 1)
            request.topics[0].name = topic
            done = await call(ADMIN, offset_commit.handle, broker, ApiKey.OFFSET_COMMIT, 9, request)
            assert done.topics[0].partitions[0].error_code == ErrorCode.NONE
        coordinator = broker.groups
        later = coordinator.now_ms() + 8 * 24 * 3_600_000  # past offsets.retention.minutes
        coordinator.now_ms = lambda: later
        # the member is still there as far as this test is concerned: no timers ran
        assert coordinator.expire_offsets() == 1
        fetched = await call(ADMIN, offset_fetch.handle, broker, ApiKey.OFFSET_FETCH, 9,
                             fetch("g", "m1", 1))
        assert [(t.name, p.committed_offset) for t in fetched.groups[0].topics
                for p in t.partitions] == [("t", 5)]

    run(scenario, [])
