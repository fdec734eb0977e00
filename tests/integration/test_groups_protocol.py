"""Group APIs over a raw socket (the kafkaproto client core, blocking): every version
we advertise, Kafka's error codes for bad input, rebalances driven by hand, static
membership, committed offsets exactly as committed (also across restarts and kill -9)."""

from __future__ import annotations

import struct
import time

import pytest
from helpers.kafkaclient import BlockingClient
from helpers.serverproc import ServerProcess

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    ProduceRequest,
    SyncGroupRequest,
)
from kafkaproto.records import build_batch

pytestmark = pytest.mark.timeout(120)

GROUP_SETTINGS = {
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 500,
    "num.partitions": 2,
}
Protocol = JoinGroupRequest.JoinGroupRequestProtocol
Assignment = SyncGroupRequest.SyncGroupRequestAssignment


# ------------------------------------------------------------------------ raw client
class Conn(BlockingClient):
    """One connection; ``send``/``recv`` apart so that parked JoinGroups can overlap."""

    def __init__(self, port: int) -> None:
        super().__init__(port, "raw-groups")


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: what a Java/kafka-python consumer sends."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def join(conn: Conn, group: str, *, version: int = 7, member_id: str = "", instance_id=None,
         protocols=(("range", b"meta"),), protocol_type: str = "consumer",
         session_ms: int = 10000, rebalance_ms: int = 10000, wait: bool = True):
    body = JoinGroupRequest(
        group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms,
        member_id=member_id, group_instance_id=instance_id, protocol_type=protocol_type,
        protocols=[Protocol(name=n, metadata=m) for n, m in protocols])
    conn.send(ApiKey.JOIN_GROUP, version, body)
    return conn.recv() if wait else None


def wait_rebalance(conn: Conn, group: str, generation: int, member_id: str) -> None:
    """Until ``member_id``'s heartbeat says the group is rebalancing: the JoinGroup another
    connection sent (without waiting for its answer) has reached the coordinator."""
    deadline = time.monotonic() + 30
    while heartbeat(conn, group, generation, member_id) != ErrorCode.REBALANCE_IN_PROGRESS:
        assert time.monotonic() < deadline, "the other member's JoinGroup never arrived"
        time.sleep(0.05)


def join_new(conn: Conn, group: str, **kw):
    """JoinGroup v4+ as a real client: MEMBER_ID_REQUIRED first, then join with the id."""
    first = join(conn, group, **kw)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED, first
    assert first.member_id
    return join(conn, group, member_id=first.member_id, **kw)


def sync(conn: Conn, group: str, generation: int, member_id: str, assignments=(), *,
         version: int = 5, protocol_type="consumer", protocol_name="range", instance_id=None,
         wait: bool = True):
    body = SyncGroupRequest(
        group_id=group, generation_id=generation, member_id=member_id,
        group_instance_id=instance_id, protocol_type=protocol_type, protocol_name=protocol_name,
        assignments=[Assignment(member_id=m, assignment=a) for m, a in assignments])
    conn.send(ApiKey.SYNC_GROUP, version, body)
    return conn.recv() if wait else None


def heartbeat(conn: Conn, group: str, generation: int, member_id: str, *, version: int = 4,
              instance_id=None):
    return conn.call(ApiKey.HEARTBEAT, version, HeartbeatRequest(
        group_id=group, generation_id=generation, member_id=member_id,
        group_instance_id=instance_id)).error_code


def commit(conn: Conn, group: str, offsets: dict, *, version: int = 8, generation: int = -1,
           member_id: str = "", metadata="m", epoch: int = -1):
    topics: dict[str, list] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(OffsetCommitRequest.OffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=epoch,
            committed_metadata=metadata))
    response = conn.call(ApiKey.OFFSET_COMMIT, version, OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps)
                for t, ps in topics.items()]))
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def fetch_v8(conn: Conn, groups: dict, require_stable: bool = False):
    """groups: id -> {topic: [partitions]} or None (all); returns id -> (error, rows)."""
    body = OffsetFetchRequest(require_stable=require_stable, groups=[
        OffsetFetchRequest.OffsetFetchRequestGroup(
            group_id=g, topics=None if spec is None else [
                OffsetFetchRequest.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                for t, ps in spec.items()])
        for g, spec in groups.items()])
    response = conn.call(ApiKey.OFFSET_FETCH, 8, body)
    return {g.group_id: (g.error_code, {
        (t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata,
                                      p.error_code)
        for t in g.topics for p in t.partitions}) for g in response.groups}


def create_topic(conn: Conn, name: str) -> None:
    """Auto-create through Metadata (num.partitions=2 on these servers)."""
    response = conn.call(ApiKey.METADATA, 9, MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=name)], allow_auto_topic_creation=True))
    assert response.topics[0].error_code == ErrorCode.NONE


@pytest.fixture(scope="module")
def srv(request, tmp_path_factory) -> ServerProcess:
    server = ServerProcess(tmp_path_factory.mktemp("groups-raw") / "data", settings=GROUP_SETTINGS)
    request.addfinalizer(server.stop)
    server.start()
    return server


@pytest.fixture
def conn(srv):
    c = Conn(srv.port)
    yield c
    c.close()


@pytest.fixture
def group(request) -> str:
    return "g-" + request.node.name.replace("[", "-").replace("]", "")


# ---------------------------------------------------------------------- FindCoordinator
@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_find_coordinator_single_key(srv, conn, version):
    response = conn.call(ApiKey.FIND_COORDINATOR, version, FindCoordinatorRequest(key="any-group"))
    assert response.error_code == ErrorCode.NONE
    assert (response.node_id, response.host, response.port) == (1, "127.0.0.1", srv.port)


def test_find_coordinator_batched_keys(srv, conn):
    response = conn.call(ApiKey.FIND_COORDINATOR, 4,
                         FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b", "c"]))
    assert [c.key for c in response.coordinators] == ["a", "b", "c"]
    for c in response.coordinators:
        assert (c.error_code, c.node_id, c.port) == (ErrorCode.NONE, 1, srv.port)


def test_find_transaction_coordinator_is_this_node(conn):
    response = conn.call(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key="tx", key_type=1))
    assert (response.error_code, response.node_id) == (ErrorCode.NONE, 1)


def test_offsets_topic_is_internal_and_read_only(conn):
    conn.call(ApiKey.FIND_COORDINATOR, 0, FindCoordinatorRequest(key="x"))  # creates it
    response = conn.call(ApiKey.METADATA, 9, MetadataRequest(topics=None))
    internal = {t.name: t.is_internal for t in response.topics}
    assert internal["__consumer_offsets"] is True
    assert not any(v for k, v in internal.items()
                   if k not in ("__consumer_offsets", "__transaction_state"))
    batch = bytearray(build_batch([(b"k", b"v", (), int(time.time() * 1000))]))
    produced = conn.call(ApiKey.PRODUCE, 7, ProduceRequest(
        transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name="__consumer_offsets", partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=bytes(batch))])]))
    error = produced.responses[0].partition_responses[0].error_code
    assert error == ErrorCode.INVALID_TOPIC_EXCEPTION


# ---------------------------------------------------------------------- bad input
def test_join_with_unknown_member_id(conn, group):
    # the group does not exist
    assert join(conn, group, member_id="nobody-1").error_code == ErrorCode.UNKNOWN_MEMBER_ID
    # the group exists, the member does not
    joined = join_new(conn, group)
    assert joined.error_code == ErrorCode.NONE
    response = join(conn, group, member_id="nobody-2")
    assert response.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert response.generation_id == -1


def test_join_with_empty_protocol_list(conn, group):
    response = join(conn, group, protocols=())
    assert response.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert join(conn, group, protocol_type="").error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_join_with_a_protocol_named_twice(conn, group):
    joined = join_new(conn, group, protocols=(("range", b"first"), ("range", b"second")))
    assert joined.error_code == ErrorCode.NONE
    assert [bytes(m.metadata) for m in joined.members] == [b"first"]


@pytest.mark.parametrize("group_id", ["", "g" * 256])
def test_join_with_invalid_group_id(conn, group_id):
    response = join(conn, group_id)
    assert response.error_code == ErrorCode.INVALID_GROUP_ID


def test_group_id_of_255_characters_is_fine(conn):
    assert join_new(conn, "h" * 255).error_code == ErrorCode.NONE


def test_join_with_session_timeout_out_of_range(conn, group):
    assert join(conn, group, session_ms=100).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    assert join(conn, group, session_ms=10**8).error_code == ErrorCode.INVALID_SESSION_TIMEOUT


def test_stale_generation_and_unknown_member(conn, group):
    joined = join_new(conn, group)
    member, generation = joined.member_id, joined.generation_id
    assert generation == 1
    synced = sync(conn, group, generation, member, [(member, b"mine")])
    assert (synced.error_code, synced.assignment) == (ErrorCode.NONE, b"mine")
    assert heartbeat(conn, group, generation, member) == ErrorCode.NONE
    assert heartbeat(conn, group, generation - 1, member) == ErrorCode.ILLEGAL_GENERATION
    assert sync(conn, group, generation - 1, member).error_code == ErrorCode.ILLEGAL_GENERATION
    assert heartbeat(conn, group, generation, "who") == ErrorCode.UNKNOWN_MEMBER_ID
    assert sync(conn, group, generation, "who").error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert heartbeat(conn, "no-such-group", 1, member) == ErrorCode.UNKNOWN_MEMBER_ID
    # an offset commit from a stale generation
    create_topic(conn, "stale-generation")
    errors = commit(conn, group, {("stale-generation", 0): 1}, generation=generation - 1,
                    member_id=member)
    assert errors == {("stale-generation", 0): ErrorCode.ILLEGAL_GENERATION}


def test_sync_v5_checks_and_echoes_protocol(conn, group):
    joined = join_new(conn, group)
    member, generation = joined.member_id, joined.generation_id
    assert (joined.protocol_type, joined.protocol_name) == ("consumer", "range")
    wrong = sync(conn, group, generation, member, protocol_name="roundrobin")
    assert wrong.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    wrong = sync(conn, group, generation, member, protocol_type="connect")
    assert wrong.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    missing = sync(conn, group, generation, member, protocol_type=None)
    assert missing.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    ok = sync(conn, group, generation, member, [(member, b"a")])
    assert (ok.error_code, ok.protocol_type, ok.protocol_name) == (0, "consumer", "range")


def test_second_member_without_a_common_protocol(srv, conn, group):
    assert join_new(conn, group).error_code == ErrorCode.NONE
    other = Conn(srv.port)
    try:
        response = join(other, group, protocols=(("roundrobin", b""),))
        assert response.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        response = join(other, group, protocol_type="connect")
        assert response.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    finally:
        other.close()


# ---------------------------------------------------------------------- versions
@pytest.mark.parametrize("version", range(10))
def test_join_sync_heartbeat_leave_every_version(conn, group, version):
    if version >= 4:
        joined = join_new(conn, group, version=version)
    else:
        joined = join(conn, group, version=version)
    assert joined.error_code == ErrorCode.NONE
    assert joined.leader == joined.member_id
    assert [(m.member_id, bytes(m.metadata)) for m in joined.members] == [(joined.member_id, b"meta")]
    assert joined.protocol_name == "range"
    if version >= 7:
        assert joined.protocol_type == "consumer"
    sync_version = min(version, 5)
    synced = sync(conn, group, joined.generation_id, joined.member_id,
                  [(joined.member_id, b"asg")], version=sync_version)
    assert (synced.error_code, synced.assignment) == (ErrorCode.NONE, b"asg")
    assert heartbeat(conn, group, joined.generation_id, joined.member_id,
                     version=min(version, 4)) == ErrorCode.NONE
    leave_version = min(version, 5)
    if leave_version <= 2:
        body = LeaveGroupRequest(group_id=group, member_id=joined.member_id)
    else:
        body = LeaveGroupRequest(group_id=group, members=[
            LeaveGroupRequest.MemberIdentity(member_id=joined.member_id)])
    left = conn.call(ApiKey.LEAVE_GROUP, leave_version, body)
    assert left.error_code == ErrorCode.NONE
    if leave_version >= 3:
        assert [(m.member_id, m.error_code) for m in left.members] == [(joined.member_id, 0)]
    again = conn.call(ApiKey.LEAVE_GROUP, leave_version, body)
    assert (again.error_code if leave_version <= 2 else again.members[0].error_code) == \
        ErrorCode.UNKNOWN_MEMBER_ID


# ---------------------------------------------------------------------- rebalances
def test_two_members_rebalance_and_assignment_from_the_leader(srv, conn, group):
    first = join_new(conn, group, protocols=(("range", b"m1"), ("roundrobin", b"m1rr")))
    a, gen1 = first.member_id, first.generation_id
    assert sync(conn, group, gen1, a, [(a, b"all")]).assignment == b"all"
    other = Conn(srv.port)
    try:
        # B prefers roundrobin but A prefers range: each votes, range and roundrobin tie 1:1
        pending = join(other, group, protocols=(("roundrobin", b"m2rr"), ("range", b"m2")))
        assert pending.error_code == ErrorCode.MEMBER_ID_REQUIRED
        join(other, group, member_id=pending.member_id,
             protocols=(("roundrobin", b"m2rr"), ("range", b"m2")), wait=False)
        wait_rebalance(conn, group, gen1, a)
        rejoined = join(conn, group, member_id=a,
                        protocols=(("range", b"m1"), ("roundrobin", b"m1rr")))
        b_joined = other.recv()
        gen2 = rejoined.generation_id
        assert gen2 == gen1 + 1 == b_joined.generation_id
        assert rejoined.leader == b_joined.leader == a  # the old leader stays leader
        assert rejoined.protocol_name == b_joined.protocol_name
        chosen = rejoined.protocol_name
        metadata = {m.member_id: bytes(m.metadata) for m in rejoined.members}
        expected = {"range": {a: b"m1", b_joined.member_id: b"m2"},
                    "roundrobin": {a: b"m1rr", b_joined.member_id: b"m2rr"}}[chosen]
        assert metadata == expected
        assert b_joined.members == []  # followers do not get the member list
        b = b_joined.member_id
        # the follower's SyncGroup waits for the leader's
        sync(other, group, gen2, b, protocol_name=chosen, wait=False)
        time.sleep(0.2)
        leader_sync = sync(conn, group, gen2, a, [(a, b"for-a"), (b, b"for-b")],
                           protocol_name=chosen)
        assert leader_sync.assignment == b"for-a"
        assert other.recv().assignment == b"for-b"
        # a follower that rejoins unchanged in Stable just gets the generation again
        again = join(other, group, member_id=b, protocols=(("roundrobin", b"m2rr"), ("range", b"m2")))
        assert (again.error_code, again.generation_id) == (ErrorCode.NONE, gen2)
    finally:
        other.close()


def test_session_timeout_expires_a_silent_member(srv, conn, group):
    first = join_new(conn, group, session_ms=1000)
    a = first.member_id
    sync(conn, group, first.generation_id, a, [(a, b"x")])
    other = Conn(srv.port)
    try:
        pending = join(other, group, session_ms=1000)
        join(other, group, member_id=pending.member_id, session_ms=1000, wait=False)
        # A never heartbeats again: after its session timeout B's rebalance completes alone
        started = time.monotonic()
        b_joined = other.recv()
        waited = time.monotonic() - started
        assert b_joined.error_code == ErrorCode.NONE
        assert [m.member_id for m in b_joined.members] == [b_joined.member_id]
        assert b_joined.leader == b_joined.member_id
        assert waited < 5, waited
        assert heartbeat(conn, group, first.generation_id, a) == ErrorCode.UNKNOWN_MEMBER_ID
    finally:
        other.close()


def test_initial_rebalance_delay_waits_for_more_members(server_factory, group):
    srv = server_factory(settings={**GROUP_SETTINGS, "group.initial.rebalance.delay.ms": 1000})
    a, b = Conn(srv.port), Conn(srv.port)
    try:
        started = time.monotonic()
        join(a, group, version=3, rebalance_ms=60000, wait=False)
        join(b, group, version=3, rebalance_ms=60000, wait=False)
        ra, rb = a.recv(), b.recv()
        elapsed = time.monotonic() - started
        assert ra.generation_id == rb.generation_id == 1  # one rebalance for both
        assert len(ra.members if ra.leader == ra.member_id else rb.members) == 2
        # after the delay, not only when the rebalance timeout (60 s) runs out
        assert 1.0 <= elapsed < 30, elapsed
    finally:
        a.close()
        b.close()


def test_static_membership(srv, conn, group):
    joined = join(conn, group, instance_id="instance-1", version=5)  # no MEMBER_ID_REQUIRED
    assert joined.error_code == ErrorCode.NONE
    old, generation = joined.member_id, joined.generation_id
    assert old.startswith("instance-1-")
    sync(conn, group, generation, old, [(old, b"p0")], instance_id="instance-1")
    # the same instance restarts: new member id, same generation, no rebalance
    other = Conn(srv.port)
    try:
        rejoined = join(other, group, instance_id="instance-1", version=5)
        new = rejoined.member_id
        assert rejoined.error_code == ErrorCode.NONE and new != old
        assert rejoined.generation_id == generation
        assert heartbeat(conn, group, generation, old, instance_id="instance-1") == \
            ErrorCode.FENCED_INSTANCE_ID
        assert heartbeat(other, group, generation, new, instance_id="instance-1") == ErrorCode.NONE
        assert rejoined.leader == old  # v5-8: the old id, so the new one does not assign
        synced = sync(other, group, generation, new, instance_id="instance-1")
        assert synced.assignment == b"p0"  # keeps the assignment of the instance
        # v9: the rejoined static leader is told it leads, but to skip the assignment
        again = join(conn, group, instance_id="instance-1", version=9)
        assert (again.error_code, again.generation_id, again.skip_assignment) == \
            (ErrorCode.NONE, generation, True)
        assert again.leader == again.member_id != new
        assert [m.group_instance_id for m in again.members] == ["instance-1"]
        assert heartbeat(other, group, generation, new, instance_id="instance-1") == \
            ErrorCode.FENCED_INSTANCE_ID
        new = again.member_id
        # admin removal by group.instance.id (LeaveGroup v3+, empty member id)
        left = other.call(ApiKey.LEAVE_GROUP, 4, LeaveGroupRequest(group_id=group, members=[
            LeaveGroupRequest.MemberIdentity(member_id="", group_instance_id="instance-1")]))
        assert left.members[0].error_code == ErrorCode.NONE
        assert heartbeat(other, group, generation, new, instance_id="instance-1") == \
            ErrorCode.UNKNOWN_MEMBER_ID
    finally:
        other.close()


# ---------------------------------------------------------------------- offsets
def test_commit_and_fetch_exactly_as_committed(conn, group, request):
    topic = f"t-{request.node.name}"
    create_topic(conn, topic)
    errors = commit(conn, group, {(topic, 0): 42, (topic, 1): 7}, metadata="méta data", epoch=5)
    assert set(errors.values()) == {ErrorCode.NONE}
    fetched = fetch_v8(conn, {group: {topic: [0, 1, 9]}})[group]
    assert fetched == (ErrorCode.NONE, {
        (topic, 0): (42, 5, "méta data", 0), (topic, 1): (7, 5, "méta data", 0),
        (topic, 9): (-1, -1, "", 0)})
    # null topics: everything the group committed
    assert set(fetch_v8(conn, {group: None})[group][1]) == {(topic, 0), (topic, 1)}
    # older versions see the same (no leader epoch before v5)
    for version in range(1, 8):
        response = conn.call(ApiKey.OFFSET_FETCH, version, OffsetFetchRequest(
            group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
                name=topic, partition_indexes=[0])]))
        p = response.topics[0].partitions[0]
        assert (p.committed_offset, p.metadata, p.error_code) == (42, "méta data", 0)
        if version >= 5:
            assert p.committed_leader_epoch == 5
    # null metadata is stored as "", as Kafka does; commit v2 with a retention time works
    assert set(commit(conn, group, {(topic, 0): 43}, metadata=None, version=2).values()) == {0}
    assert fetch_v8(conn, {group: {topic: [0]}})[group][1][(topic, 0)] == (43, -1, "", 0)


def test_commit_errors(conn, group, request):
    topic = f"t-{request.node.name}"
    create_topic(conn, topic)
    errors = commit(conn, group, {(topic, 0): 1, (topic, 5): 1, ("no-such-topic", 0): 1})
    assert errors == {(topic, 0): 0, (topic, 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    errors = commit(conn, group, {(topic, 1): 1}, metadata="x" * 5000)
    assert errors == {(topic, 1): ErrorCode.OFFSET_METADATA_TOO_LARGE}
    # a generation for a group that does not exist: a forgotten member
    errors = commit(conn, "g-never-seen", {(topic, 1): 1}, generation=3, member_id="m")
    assert errors == {(topic, 1): ErrorCode.ILLEGAL_GENERATION}
    # members only, while the group has members
    joined = join_new(conn, group + "-live")
    errors = commit(conn, group + "-live", {(topic, 1): 1})
    assert errors == {(topic, 1): ErrorCode.UNKNOWN_MEMBER_ID}
    errors = commit(conn, group + "-live", {(topic, 1): 1}, generation=joined.generation_id,
                    member_id=joined.member_id)
    assert errors == {(topic, 1): ErrorCode.REBALANCE_IN_PROGRESS}  # not synced yet
    sync(conn, group + "-live", joined.generation_id, joined.member_id)
    errors = commit(conn, group + "-live", {(topic, 1): 1}, generation=joined.generation_id,
                    member_id=joined.member_id)
    assert errors == {(topic, 1): ErrorCode.NONE}


def test_offset_fetch_v8_several_groups(conn, group, request):
    topic = f"t-{request.node.name}"
    create_topic(conn, topic)
    commit(conn, group + "-a", {(topic, 0): 1})
    commit(conn, group + "-b", {(topic, 1): 2})
    result = fetch_v8(conn, {group + "-a": None, group + "-b": {topic: [0, 1]},
                             group + "-none": None, "x" * 300: None})
    assert result[group + "-a"] == (0, {(topic, 0): (1, -1, "m", 0)})
    assert result[group + "-b"] == (0, {(topic, 0): (-1, -1, "", 0), (topic, 1): (2, -1, "m", 0)})
    assert result[group + "-none"] == (0, {})
    assert result["x" * 300][0] == ErrorCode.INVALID_GROUP_ID


def test_list_describe_delete_groups(conn, group, request):
    topic = f"t-{request.node.name}"
    create_topic(conn, topic)
    joined = join_new(conn, group, protocols=(("range", subscription(topic)),))
    member = joined.member_id
    sync(conn, group, joined.generation_id, member, [(member, b"asg")])
    commit(conn, group + "-simple", {(topic, 0): 3})
    listed = conn.call(ApiKey.LIST_GROUPS, 4, ListGroupsRequest(states_filter=["stable"]))
    assert (group, "consumer", "Stable") in {(g.group_id, g.protocol_type, g.group_state)
                                             for g in listed.groups}
    assert group + "-simple" not in {g.group_id for g in listed.groups}
    listed = conn.call(ApiKey.LIST_GROUPS, 0, ListGroupsRequest())
    assert {group, group + "-simple"} <= {g.group_id for g in listed.groups}
    described = conn.call(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(
        groups=[group, "g-unknown"], include_authorized_operations=True))
    g, unknown = described.groups
    assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == \
        (0, "Stable", "consumer", "range")
    assert [(m.member_id, bytes(m.member_metadata), bytes(m.member_assignment), m.client_id)
            for m in g.members] == [(member, subscription(topic), b"asg", "raw-groups")]
    assert [m.client_host for m in g.members] == ["/127.0.0.1"]  # as Kafka reports the peer
    assert g.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)
    assert (unknown.error_code, unknown.group_state, unknown.members) == (0, "Dead", [])
    # only empty groups may be deleted
    deleted = conn.call(ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(
        groups_names=[group, group + "-simple", "g-unknown"]))
    assert {r.group_id: r.error_code for r in deleted.results} == {
        group: ErrorCode.NON_EMPTY_GROUP, group + "-simple": ErrorCode.NONE,
        "g-unknown": ErrorCode.GROUP_ID_NOT_FOUND}
    assert fetch_v8(conn, {group + "-simple": None})[group + "-simple"] == (0, {})


def test_offset_delete(conn, group, request):
    topic, other_topic = f"t-{request.node.name}", f"u-{request.node.name}"
    create_topic(conn, topic)
    create_topic(conn, other_topic)
    joined = join_new(conn, group, protocols=(("range", subscription(topic)),))
    member, generation = joined.member_id, joined.generation_id
    sync(conn, group, generation, member, [(member, b"")])
    commit(conn, group, {(topic, 0): 5, (other_topic, 0): 6}, generation=generation,
           member_id=member)
    response = conn.call(ApiKey.OFFSET_DELETE, 0, OffsetDeleteRequest(group_id=group, topics=[
        OffsetDeleteRequest.OffsetDeleteRequestTopic(name=t, partitions=[
            OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])
        for t in (topic, other_topic, "no-such-topic")]))
    assert response.error_code == ErrorCode.NONE
    assert {(t.name, p.error_code) for t in response.topics for p in t.partitions} == {
        (topic, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC), (other_topic, ErrorCode.NONE),
        ("no-such-topic", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}
    assert set(fetch_v8(conn, {group: None})[group][1]) == {(topic, 0)}
    missing = conn.call(ApiKey.OFFSET_DELETE, 0, OffsetDeleteRequest(group_id="g-nope", topics=[]))
    assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND


# ---------------------------------------------------------------------- persistence
@pytest.mark.parametrize("how", ["clean", "kill9"])
def test_offsets_and_groups_survive_restart(server_factory, how):
    settings = dict(GROUP_SETTINGS)
    if how == "kill9":
        settings["log.flush.interval.messages"] = 1  # each commit is fsynced before its ack
    srv = server_factory(settings=settings)
    conn = Conn(srv.port)
    create_topic(conn, "persist")
    for i in range(20):  # many commits: the last one wins
        assert set(commit(conn, "g-persist", {("persist", 0): i, ("persist", 1): 100 + i},
                          metadata=f"meta-{i}", epoch=i % 3).values()) == {0}
    commit(conn, "g-gone", {("persist", 0): 1})
    deleted = conn.call(ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=["g-gone"]))
    assert deleted.results[0].error_code == 0
    joined = join_new(conn, "g-members", protocols=(("range", subscription("persist")),))
    sync(conn, "g-members", joined.generation_id, joined.member_id, [(joined.member_id, b"a")])
    conn.close()
    srv.restart(clean=how == "clean")
    conn = Conn(srv.port)
    try:
        deadline = time.monotonic() + 10
        while True:  # answers "loading" until the replay is done
            result = fetch_v8(conn, {"g-persist": None, "g-gone": None})
            if result["g-persist"][0] != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                break
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert result["g-persist"] == (0, {("persist", 0): (19, 1, "meta-19", 0),
                                           ("persist", 1): (119, 1, "meta-19", 0)})
        assert result["g-gone"] == (0, {})
        listed = conn.call(ApiKey.LIST_GROUPS, 4, ListGroupsRequest())
        states = {g.group_id: g.group_state for g in listed.groups}
        assert "g-gone" not in states
        assert states["g-persist"] == "Empty"
        # the member came back with the group (Kafka persists the generation)...
        assert states["g-members"] == "Stable"
        assert heartbeat(conn, "g-members", joined.generation_id, joined.member_id) == 0
    finally:
        conn.close()


def test_member_that_disconnects_while_parked_is_dropped_after_the_rebalance(srv, conn, group):
    """B's JoinGroup is parked when B's connection dies: the rebalance still completes
    (B counts as joined, as in Kafka), B never sends SyncGroup, and the sync timeout
    (the rebalance timeout) removes it so that A ends up alone in a new generation."""
    # A rejoins within the rebalance timeout (3 s, a member slower than that is removed
    # too); B's sync timeout is the same 3 s.
    first = join_new(conn, group, rebalance_ms=3000)
    a = first.member_id
    sync(conn, group, first.generation_id, a, [(a, b"x")])
    other = Conn(srv.port)
    pending = join(other, group, rebalance_ms=3000)
    join(other, group, member_id=pending.member_id, rebalance_ms=3000, wait=False)
    wait_rebalance(conn, group, first.generation_id, a)
    other.close()  # gone while parked
    second = join(conn, group, member_id=a, rebalance_ms=3000)
    assert len(second.members) == 2
    sync(conn, group, second.generation_id, a, [(a, b"y"), (pending.member_id, b"z")])
    deadline = time.monotonic() + 30
    while heartbeat(conn, group, second.generation_id, a) != ErrorCode.REBALANCE_IN_PROGRESS:
        assert time.monotonic() < deadline, "the silent member was never removed"
        time.sleep(0.1)
    third = join(conn, group, member_id=a, rebalance_ms=3000)
    assert [m.member_id for m in third.members] == [a]
    assert third.generation_id == second.generation_id + 1


def test_server_stops_promptly_with_a_parked_join(server_factory, group):
    srv = server_factory(settings=GROUP_SETTINGS)
    a, b = Conn(srv.port), Conn(srv.port)
    try:
        first = join(a, group, version=3, rebalance_ms=60000)
        sync(a, group, first.generation_id, first.member_id, version=3)
        join(b, group, version=3, rebalance_ms=60000, wait=False)  # waits for A to rejoin
        wait_rebalance(a, group, first.generation_id, first.member_id)
        # promptly: well before the parked join's 60 s (else SIGKILL, exit code -9)
        assert srv.stop(timeout=30) == 0
    finally:
        a.close()
        b.close()
