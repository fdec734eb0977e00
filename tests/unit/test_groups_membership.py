"""The classic membership state machine (logserver/groups/membership.py) without a broker,
an event loop or sockets: events go in with a clock value, decisions come out."""

from __future__ import annotations

from helpers.groupsim import Sim

from kafkaproto import ErrorCode
from logserver.groups import records as rec
from logserver.groups.decisions import Append, ArmTimer, CancelTimer, Reply, TimerKey, TimerKind
from logserver.groups.group import JoinResult, SyncResult
from logserver.groups.membership import NEW_MEMBER_JOIN_TIMEOUT_MS, MembershipSettings

HEARTBEAT, PENDING, JOIN, SYNC = (TimerKind.HEARTBEAT, TimerKind.PENDING_MEMBER,
                                  TimerKind.JOIN, TimerKind.SYNC)


def stable_group(sim: Sim, group: str, members: int = 1, **join) -> list[str]:
    """Members joined (leader first), synced and Stable in generation 1."""
    requests = [sim.join(group, **join) for _ in range(members)]
    sim.advance(0)  # the initial delay (0 here) is over
    ids = [sim.reply(r).member_id for r in requests]
    assert all(sim.reply(r).generation_id == 1 for r in requests)
    leader = sim.reply(requests[0]).leader_id
    assert leader == ids[0]
    syncs = [sim.sync(group, 1, m, {m: f"for-{m}".encode() for m in ids} if m == leader else None)
             for m in ids]
    sim.complete()
    assert all(sim.reply(s).error == ErrorCode.NONE for s in syncs)
    assert sim.group(group).state.value == "Stable"
    return ids


def test_new_member_gets_member_id_required_and_a_pending_timer():
    sim = Sim()
    request = sim.request()
    decisions = sim.membership.join_group(
        sim.now, request, group_id="g", member_id="", group_instance_id=None,
        require_known_member_id=True, support_skip_assignment=False, client_id="c",
        client_host="h", rebalance_timeout_ms=20_000, session_timeout_ms=10_000,
        protocol_type="consumer", protocols=[("range", b"m")], reason=None)
    key = TimerKey(PENDING, "g", "c-1")
    assert decisions == [ArmTimer(key, 10_000),
                         Reply(request, JoinResult("c-1", ErrorCode.MEMBER_ID_REQUIRED))]
    sim.apply(decisions)
    # joining with the handed-out id cancels that timer and parks the join
    joined = sim.join("g", "c-1", require_known=True)
    assert key not in sim.timers and joined not in sim.replies
    assert sim.group("g").state.value == "PreparingRebalance"
    sim.advance(0)
    result = sim.reply(joined)
    assert (result.error, result.member_id, result.generation_id, result.leader_id) == \
        (ErrorCode.NONE, "c-1", 1, "c-1")
    assert result.members == [("c-1", None, b"meta")]


def test_a_pending_member_id_expires_unused():
    sim = Sim()
    first = sim.join("g", require_known=True, session=5_000)
    member = sim.reply(first).member_id
    sim.advance(5_000)
    assert not sim.group("g").pending_members and not sim.timers
    assert sim.reply(sim.join("g", member, require_known=True)).error == \
        ErrorCode.UNKNOWN_MEMBER_ID


def test_join_errors():
    sim = Sim()
    assert sim.reply(sim.join("g", session=50)).error == ErrorCode.INVALID_SESSION_TIMEOUT
    assert sim.reply(sim.join("g", session=70_000)).error == ErrorCode.INVALID_SESSION_TIMEOUT
    assert sim.reply(sim.join("nowhere", "someone")).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert sim.reply(sim.join("g", protocols=[])).error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert sim.reply(sim.join("g", protocol_type="")).error == \
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    a, = stable_group(sim, "s")
    assert sim.reply(sim.join("s", "stranger")).error == ErrorCode.UNKNOWN_MEMBER_ID
    # a second member must share the protocol type and one protocol
    assert sim.reply(sim.join("s", protocols=[("roundrobin", b"")])).error == \
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert sim.reply(sim.join("s", protocol_type="connect")).error == \
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert sim.reply(sim.join("s", a, protocol_type="connect")).error == \
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_group_max_size():
    sim = Sim(settings=MembershipSettings(100, 60_000, 0, max_group_size=1))
    stable_group(sim, "g")
    assert sim.reply(sim.join("g")).error == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_rebalance_new_generation_and_leader_assignment():
    sim = Sim()
    a, = stable_group(sim, "g", protocols=[("range", b"a"), ("roundrobin", b"a-rr")])
    assert sim.heartbeat("g", 1, a) == ErrorCode.NONE
    b_join = sim.join("g", protocols=[("roundrobin", b"b-rr"), ("range", b"b")])
    assert b_join not in sim.replies  # parked: A must rejoin first
    assert sim.group("g").state.value == "PreparingRebalance"
    assert sim.heartbeat("g", 1, a) == ErrorCode.REBALANCE_IN_PROGRESS
    a_join = sim.join("g", a, protocols=[("range", b"a"), ("roundrobin", b"a-rr")])
    # every member rejoined: no need to wait for the rebalance timeout
    a_result, b_result = sim.reply(a_join), sim.reply(b_join)
    b = b_result.member_id
    assert a_result.generation_id == b_result.generation_id == 2
    assert a_result.leader_id == b_result.leader_id == a  # the old leader stays leader
    assert a_result.protocol_name == "range"  # 1:1 vote, the first voted wins
    assert a_result.members == [(a, None, b"a"), (b, None, b"b")]
    assert b_result.members == []  # followers do not get the member list
    assert TimerKey(SYNC, "g", generation=2) in sim.timers  # one per generation
    # the follower's SyncGroup waits for the leader's assignment to be durable
    b_sync = sim.sync("g", 2, b)
    a_sync = sim.sync("g", 2, a, {a: b"for-a", b: b"for-b"})
    assert TimerKey(SYNC, "g", generation=2) not in sim.timers  # everyone synced
    assert a_sync not in sim.replies and b_sync not in sim.replies
    (append,) = sim.appends
    value = rec.parse_group_value(append.records[0][1])
    assert (value.generation, value.leader, [m.assignment for m in value.members]) == \
        (2, a, [b"for-a", b"for-b"])
    sim.complete()
    assert sim.reply(a_sync) == SyncResult(ErrorCode.NONE, "consumer", "range", b"for-a")
    assert sim.reply(b_sync).assignment == b"for-b"
    assert sim.group("g").state.value == "Stable"
    assert sim.group("g").persisted_value == append.records[0][1]
    # Stable: a follower that rejoins unchanged gets the generation again, no rebalance
    again = sim.reply(sim.join("g", b, protocols=[("roundrobin", b"b-rr"), ("range", b"b")]))
    assert (again.error, again.generation_id, again.members) == (ErrorCode.NONE, 2, [])
    # SyncGroup in Stable returns the stored assignment without the leader
    assert sim.reply(sim.sync("g", 2, b)).assignment == b"for-b"


def test_sync_errors():
    sim = Sim()
    a, = stable_group(sim, "g")
    assert sim.reply(sim.sync("g", 0, a)).error == ErrorCode.ILLEGAL_GENERATION
    assert sim.reply(sim.sync("g", 1, "who")).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert sim.reply(sim.sync("nowhere", 1, a)).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert sim.reply(sim.sync("g", 1, a, protocol_name="roundrobin")).error == \
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert sim.reply(sim.sync("g", 1, a, protocol_type="connect")).error == \
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    sim.join("g")  # a second member: A must rejoin
    assert sim.reply(sim.sync("g", 1, a)).error == ErrorCode.REBALANCE_IN_PROGRESS


def test_a_failed_assignment_write_is_reported_and_rebalances():
    sim = Sim()
    join = sim.join("g")
    sim.advance(0)
    a = sim.reply(join).member_id
    synced = sim.sync("g", 1, a, {a: b"x"})
    sim.complete(ErrorCode.INVALID_COMMIT_OFFSET_SIZE)
    # Kafka's mapping for a group record that does not fit
    assert sim.reply(synced) == SyncResult(ErrorCode.UNKNOWN_SERVER_ERROR)
    assert sim.group("g").state.value == "PreparingRebalance"
    assert sim.group("g").persisted_value is None


def test_heartbeat_errors_and_rearm():
    sim = Sim()
    a, = stable_group(sim, "g")
    key = TimerKey(HEARTBEAT, "g", a)
    sim.now += 5_000
    error, decisions = sim.membership.heartbeat(sim.now, group_id="g", member_id=a,
                                                group_instance_id=None, generation_id=1)
    assert (error, decisions) == (ErrorCode.NONE, [CancelTimer(key), ArmTimer(key, 10_000)])
    assert sim.heartbeat("g", 0, a) == ErrorCode.ILLEGAL_GENERATION
    assert sim.heartbeat("g", 1, "who") == ErrorCode.UNKNOWN_MEMBER_ID
    assert sim.heartbeat("nowhere", 1, a) == ErrorCode.UNKNOWN_MEMBER_ID


def test_session_timeout_removes_a_silent_member_and_rebalances():
    sim = Sim()
    a, b = stable_group(sim, "g", members=2, session=1_000)
    for _ in range(2):  # B keeps heartbeating, A does not
        sim.advance(400)
        assert sim.heartbeat("g", 1, b) == ErrorCode.NONE
    assert a in sim.group("g").members
    sim.advance(200)  # A's session timeout is over
    assert a not in sim.group("g").members
    assert sim.group("g").state.value == "PreparingRebalance"
    assert sim.heartbeat("g", 1, a) == ErrorCode.UNKNOWN_MEMBER_ID
    assert sim.heartbeat("g", 1, b) == ErrorCode.REBALANCE_IN_PROGRESS
    rejoined = sim.reply(sim.join("g", b, session=1_000))
    assert (rejoined.generation_id, rejoined.leader_id, rejoined.members) == \
        (2, b, [(b, None, b"meta")])  # B leads now


def test_rebalance_timeout_removes_members_that_did_not_rejoin():
    sim = Sim()
    a, b, c = stable_group(sim, "g", members=3, rebalance=3_000)
    # the follower B rejoins with another subscription: a rebalance
    b_join = sim.join("g", b, rebalance=3_000, protocols=[("range", b"changed")])
    assert sim.timers[TimerKey(JOIN, "g")] == sim.now + 3_000
    for _ in range(5):  # the others keep heartbeating but never rejoin
        sim.advance(500)
        assert sim.heartbeat("g", 1, a) == sim.heartbeat("g", 1, c) == \
            ErrorCode.REBALANCE_IN_PROGRESS
    assert b_join not in sim.replies
    sim.advance(500)
    result = sim.reply(b_join)
    # the leader A did not rejoin: B, which did, is elected
    assert (result.generation_id, result.leader_id) == (2, b)
    assert result.members == [(b, None, b"changed")]
    assert set(sim.group("g").members) == {b}
    assert TimerKey(HEARTBEAT, "g", a) not in sim.timers


def test_a_new_member_that_never_completes_its_join_is_dropped():
    sim = Sim()
    a, = stable_group(sim, "g", rebalance=3_000)
    sim.join("g", rebalance=3_000)  # B joins, then its client goes away
    new = [m for m in sim.group("g").members if m != a][0]
    assert sim.timers[TimerKey(HEARTBEAT, "g", new)] == sim.now + NEW_MEMBER_JOIN_TIMEOUT_MS
    a_join = sim.join("g", a, rebalance=3_000)
    assert sim.reply(a_join).generation_id == 2  # B counts as joined
    sim.sync("g", 2, a, {a: b"", new: b""})
    sim.complete()
    # B never sends SyncGroup: the SyncGroup deadline removes it, A rebalances alone
    sim.fire(TimerKey(SYNC, "g", generation=2))
    assert set(sim.group("g").members) == {a}
    assert sim.heartbeat("g", 2, a) == ErrorCode.REBALANCE_IN_PROGRESS
    assert sim.reply(sim.join("g", a)).generation_id == 3


def test_pending_sync_expiry_in_completing_rebalance():
    sim = Sim()
    a, b = stable_group(sim, "g", members=2)
    a_join, b_join = sim.join("g", a), sim.join("g", b)
    assert sim.reply(a_join).generation_id == sim.reply(b_join).generation_id == 2
    b_sync = sim.sync("g", 2, b)  # the follower syncs, the leader never does
    for _ in range(3):  # both stay alive
        sim.advance(5_000)
        assert sim.heartbeat("g", 2, a) == sim.heartbeat("g", 2, b) == ErrorCode.NONE
    assert b_sync not in sim.replies
    sim.advance(5_000)  # the rebalance timeout: A never sent SyncGroup
    assert a not in sim.group("g").members
    assert sim.reply(b_sync).error == ErrorCode.REBALANCE_IN_PROGRESS
    assert sim.group("g").state.value == "PreparingRebalance"
    assert sim.reply(sim.join("g", b)).generation_id == 3


def test_initial_rebalance_delay_waits_for_more_members():
    sim = Sim(settings=MembershipSettings(100, 60_000, initial_rebalance_delay_ms=1_000))
    first = sim.join("g", rebalance=10_000)
    assert sim.timers[TimerKey(JOIN, "g")] == sim.now + 1_000
    sim.advance(300)
    second = sim.join("g", rebalance=10_000)
    sim.advance(700)  # the first delay is over, but a member arrived meanwhile: wait again
    assert first not in sim.replies and TimerKey(JOIN, "g") in sim.timers
    sim.advance(1_000)
    assert sim.reply(first).generation_id == sim.reply(second).generation_id == 1
    assert len(sim.group("g").members) == 2


def test_leave_group():
    sim = Sim()
    a, b = stable_group(sim, "g", members=2)
    pending = sim.reply(sim.join("g", require_known=True)).member_id
    error, results = sim.leave("g", (b, None), (pending, None), ("who", None))
    assert error == ErrorCode.NONE
    assert results == [(b, None, ErrorCode.NONE), (pending, None, ErrorCode.NONE),
                       ("who", None, ErrorCode.UNKNOWN_MEMBER_ID)]
    assert TimerKey(HEARTBEAT, "g", b) not in sim.timers
    assert TimerKey(PENDING, "g", pending) not in sim.timers
    assert sim.group("g").state.value == "PreparingRebalance"
    assert sim.reply(sim.join("g", a)).members == [(a, None, b"meta")]
    assert sim.leave("nowhere", (a, None)) == (ErrorCode.NONE,
                                               [(a, None, ErrorCode.UNKNOWN_MEMBER_ID)])
    # the last member leaves: at once Empty, and the empty generation is written
    sim.sync("g", 2, a, {a: b""})
    sim.complete()
    sim.leave("g", (a, None))
    assert not sim.timers
    group = sim.group("g")
    assert (group.state.value, group.generation_id) == ("Empty", 3)
    (append,) = sim.appends
    assert rec.parse_group_value(append.records[0][1]).members == []


def test_a_parked_join_of_a_leaving_member_is_answered():
    sim = Sim()
    a, b = stable_group(sim, "g", members=2)
    a_join = sim.join("g", a)
    assert a_join not in sim.replies
    sim.leave("g", (a, None))
    assert sim.reply(a_join) == JoinResult("", ErrorCode.UNKNOWN_MEMBER_ID)


def test_a_retried_join_answers_the_one_it_replaces():
    sim = Sim()
    a, b = stable_group(sim, "g", members=2)
    first = sim.join("g", a)
    second = sim.join("g", a)
    assert sim.reply(first) == JoinResult(a, ErrorCode.REBALANCE_IN_PROGRESS)
    assert second not in sim.replies
    sim.join("g", b)
    assert sim.reply(second).generation_id == 2


def test_static_member_replaced_without_a_rebalance():
    sim = Sim()
    join = sim.join("g", instance="i-1")
    sim.advance(0)
    old = sim.reply(join).member_id
    assert old.startswith("i-1-")
    sim.sync("g", 1, old, {old: b"p0"}, instance="i-1")
    sim.complete()
    old_sync = sim.sync("g", 1, old, instance="i-1")  # Stable: answered at once
    assert sim.reply(old_sync).assignment == b"p0"
    # the instance restarts: a new member id, the same generation, no rebalance...
    rejoin = sim.join("g", instance="i-1")
    group = sim.group("g")
    new = group.static_members["i-1"]
    assert new != old and group.state.value == "Stable"
    assert TimerKey(HEARTBEAT, "g", old) not in sim.timers
    assert TimerKey(HEARTBEAT, "g", new) in sim.timers
    assert sim.heartbeat("g", 1, old, "i-1") == ErrorCode.FENCED_INSTANCE_ID
    # ...answered once the new member id is durable, with the old leader id (v5-8)
    assert rejoin not in sim.replies
    sim.complete()
    result = sim.reply(rejoin)
    assert (result.error, result.member_id, result.generation_id, result.leader_id,
            result.members) == (ErrorCode.NONE, new, 1, old, [])
    assert sim.reply(sim.sync("g", 1, new, instance="i-1")).assignment == b"p0"
    # v9: the rejoined static leader is told it leads, but to skip the assignment
    again = sim.join("g", instance="i-1", skip=True)
    sim.complete()
    result = sim.reply(again)
    assert result.skip_assignment and result.leader_id == result.member_id != new
    assert result.members == [(result.member_id, "i-1", b"meta")]
    # a parked request of the fenced member id hears FENCED_INSTANCE_ID
    assert sim.heartbeat("g", 1, new, "i-1") == ErrorCode.FENCED_INSTANCE_ID
    # admin removal by group.instance.id
    assert sim.leave("g", ("", "i-1"))[1] == [("", "i-1", ErrorCode.NONE)]
    assert sim.heartbeat("g", 1, result.member_id, "i-1") == ErrorCode.UNKNOWN_MEMBER_ID


def test_static_member_replacement_rolls_back_when_it_cannot_be_written():
    sim = Sim()
    join = sim.join("g", instance="i-1")
    sim.advance(0)
    old = sim.reply(join).member_id
    sim.sync("g", 1, old, {old: b"p0"}, instance="i-1")
    sim.complete()
    rejoin = sim.join("g", instance="i-1")
    sim.complete(ErrorCode.NOT_COORDINATOR)
    result = sim.reply(rejoin)
    assert (result.error, result.member_id, result.leader_id) == \
        (ErrorCode.NOT_COORDINATOR, "", old)
    assert sim.group("g").static_members["i-1"] == old
    assert sim.heartbeat("g", 1, old, "i-1") == ErrorCode.NONE
    assert sim.group("g").awaiting_join == 0


def test_a_parked_sync_of_a_replaced_static_member_is_fenced():
    sim = Sim()
    a_join = sim.join("g", instance="i-a")
    b_join = sim.join("g", instance="i-b")
    sim.advance(0)
    a, b = sim.reply(a_join).member_id, sim.reply(b_join).member_id
    b_sync = sim.sync("g", 1, b, instance="i-b")  # waits for the leader
    sim.join("g", instance="i-b")  # i-b restarts: Completing, so a new rebalance starts
    assert sim.reply(b_sync) == SyncResult(ErrorCode.FENCED_INSTANCE_ID)
    assert sim.group("g").state.value == "PreparingRebalance"
    assert sim.heartbeat("g", 1, a, "i-a") == ErrorCode.REBALANCE_IN_PROGRESS


def test_offset_commit_checks_membership_and_counts_as_heartbeat():
    sim = Sim()
    error, group, _ = sim.membership.accept_commit(
        sim.now, group_id="gone", member_id="m", group_instance_id=None, generation_id=3)
    assert (error, group) == (ErrorCode.ILLEGAL_GENERATION, None)
    error, group, _ = sim.membership.accept_commit(
        sim.now, group_id="simple", member_id="", group_instance_id=None, generation_id=-1)
    assert error is None and group is sim.group("simple")
    a, = stable_group(sim, "g")
    error, _, decisions = sim.membership.accept_commit(
        sim.now, group_id="g", member_id="", group_instance_id=None, generation_id=-1)
    assert error == ErrorCode.UNKNOWN_MEMBER_ID  # only members commit for a live group
    error, _, decisions = sim.membership.accept_commit(
        sim.now, group_id="g", member_id=a, group_instance_id=None, generation_id=1)
    key = TimerKey(HEARTBEAT, "g", a)
    assert error is None and decisions == [CancelTimer(key), ArmTimer(key, 10_000)]
    assert sim.reply(sim.join("g", a)).generation_id == 2  # the leader rejoins: Completing
    error, _, _ = sim.membership.accept_commit(
        sim.now, group_id="g", member_id=a, group_instance_id=None, generation_id=2)
    assert error == ErrorCode.REBALANCE_IN_PROGRESS


def test_shutdown_answers_every_parked_request_and_cancels_every_timer():
    sim = Sim()
    a, b = stable_group(sim, "g", members=2)
    a_join = sim.join("g", a)
    decisions = sim.apply(sim.membership.shutdown())
    assert sim.reply(a_join) == JoinResult(a, ErrorCode.NOT_COORDINATOR)
    assert not sim.timers
    assert not any(isinstance(d, (ArmTimer, Append)) for d in decisions)
