"""The KIP-848 consumer group machine (logserver/groups/consumer) without a broker, an
event loop or sockets: heartbeats go in with a clock value and a topic catalog (plain
data), decisions come out. Also the two server-side assignors and the records that
persist a group in ``__consumer_offsets``."""

from __future__ import annotations

import itertools

import pytest

from kafkaproto import ErrorCode
from logserver.groups.consumer.assignors import range_, uniform
from logserver.groups.consumer.loading import ConsumerReplay
from logserver.groups.consumer.machine import (
    NOT_A_CONSUMER_GROUP,
    ConsumerGroups,
    ConsumerSettings,
    ConsumerWritten,
    HeartbeatRequest,
    HeartbeatResult,
)
from logserver.groups.consumer.model import GroupState, MemberState
from logserver.groups.decisions import Append, ArmTimer, CancelTimer, Reply, TimerKey, TimerKind


class Catalog:
    """Topics as the broker's storage would describe them (names, counts, ids)."""

    def __init__(self, **topics: int) -> None:
        self.counts = dict(topics)

    def topic_names(self) -> list[str]:
        return sorted(self.counts)

    def partition_count(self, topic: str) -> int | None:
        return self.counts.get(topic)

    def topic_id(self, topic: str) -> bytes | None:
        return topic.encode().ljust(16, b"\0")[:16] if topic in self.counts else None

    def topic_for_id(self, topic_id: bytes) -> str | None:
        name = topic_id.rstrip(b"\0").decode()
        return name if name in self.counts else None


class Sim:
    """Drives the machine like the coordinator's glue: appends complete at once."""

    def __init__(self, **settings: object) -> None:
        self.machine = ConsumerGroups(ConsumerSettings(**settings))  # type: ignore[arg-type]
        self.catalog = Catalog(t=4)
        self.now = 0
        self.requests = itertools.count(1)
        self.timers: dict[TimerKey, int] = {}
        self.appended: list[tuple[bytes, bytes | None]] = []

    def apply(self, decisions: list) -> list[HeartbeatResult]:
        replies = []
        for decision in decisions:
            if isinstance(decision, ArmTimer):
                self.timers[decision.key] = self.now + decision.delay_ms
            elif isinstance(decision, CancelTimer):
                self.timers.pop(decision.key, None)
            elif isinstance(decision, Append):
                assert isinstance(decision.then, ConsumerWritten)
                self.appended.extend(decision.records)
                replies += self.apply(self.machine.on_written(self.now, decision.then,
                                                              ErrorCode.NONE))
            elif isinstance(decision, Reply):
                replies.append(decision.result)
        return replies

    def hb(self, member: str, epoch: int, owned: dict[str, set[int]] | None = None,
           **fields: object) -> HeartbeatResult:
        request = HeartbeatRequest(group_id="g", member_id=member, member_epoch=epoch,
                                   owned=owned, **fields)  # type: ignore[arg-type]
        if epoch == 0:
            request.rebalance_timeout_ms = int(fields.get("rebalance_timeout_ms", 60_000))  # type: ignore[call-overload]
            if request.subscribed_names is None and request.subscribed_regex is None:
                request.subscribed_names = ["t"]
        replies = self.apply(self.machine.heartbeat(self.now, next(self.requests), request,
                                                    self.catalog))
        assert len(replies) == 1
        return replies[0]

    def advance(self, ms: int) -> None:
        self.now += ms
        for key, when in sorted(self.timers.items(), key=lambda kv: kv[1]):
            if when <= self.now and self.timers.get(key) == when:
                del self.timers[key]
                self.apply(self.machine.on_timer(self.now, key, self.catalog))

    @property
    def group(self):
        return self.machine.groups["g"]


def parts(result: HeartbeatResult) -> set[int]:
    assert result.assignment is not None
    return set(result.assignment.get("t", set()))


def test_first_member_gets_every_partition_and_the_group_epoch():
    sim = Sim()
    r = sim.hb("a", 0)
    assert (r.error, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (0, "a", 1, 5000)
    assert parts(r) == {0, 1, 2, 3}
    assert sim.group.state is GroupState.STABLE
    # a heartbeat that changes nothing carries no assignment
    assert sim.hb("a", 1, {"t": {0, 1, 2, 3}}).assignment is None


def test_v0_member_without_id_gets_one():
    sim = Sim()
    r = sim.hb("", 0, version=0)
    assert r.error == ErrorCode.NONE and r.member_id


def test_revoke_before_assign_to_the_new_member():
    sim = Sim()
    sim.hb("a", 0)
    b = sim.hb("b", 0)
    # b joins at epoch 2, but every partition is still a's: nothing for b yet
    assert b.member_epoch == 2 and parts(b) == set()
    assert sim.group.members["b"].state is MemberState.UNRELEASED_PARTITIONS
    a = sim.hb("a", 1, {"t": {0, 1, 2, 3}})
    # a must give up two partitions and stays at epoch 1 until it says it did
    assert a.member_epoch == 1 and len(parts(a)) == 2
    kept = parts(a)
    assert sim.group.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    # b still gets nothing: a has not acknowledged
    assert sim.hb("b", 2, {}).assignment is None
    assert sim.group.state is GroupState.RECONCILING
    # a acknowledges (owns only what it kept): now epoch 2
    a = sim.hb("a", 1, {"t": kept})
    assert a.member_epoch == 2 and a.assignment is None
    b = sim.hb("b", 2, {})
    assert parts(b) == {0, 1, 2, 3} - kept
    assert sim.group.state is GroupState.STABLE


def test_leave_frees_partitions_for_the_others():
    sim = Sim()
    sim.hb("a", 0)
    sim.hb("b", 0)
    kept = parts(sim.hb("a", 1, {"t": {0, 1, 2, 3}}))
    sim.hb("a", 1, {"t": kept})
    sim.hb("b", 2, {})
    left = sim.hb("b", -1)
    assert (left.error, left.member_epoch) == (0, -1)
    r = sim.hb("a", 2, {"t": kept})
    assert r.member_epoch == 3 and parts(r) == {0, 1, 2, 3}
    assert sim.hb("b", 2, {}).error == ErrorCode.UNKNOWN_MEMBER_ID


def test_session_timeout_removes_a_silent_member():
    sim = Sim(session_timeout_ms=3000)
    sim.hb("a", 0)
    sim.hb("b", 0)
    kept = parts(sim.hb("a", 1, {"t": {0, 1, 2, 3}}))
    sim.hb("a", 1, {"t": kept})
    sim.hb("b", 2, {})
    for _ in range(3):  # a heartbeats, b is gone silent
        sim.advance(1000)
        r = sim.hb("a", sim.group.members["a"].epoch, {"t": kept})
    assert "b" not in sim.group.members
    assert parts(r) == {0, 1, 2, 3}


def test_revocation_not_acknowledged_in_time_fences_the_member():
    sim = Sim()
    sim.hb("a", 0)
    sim.hb("b", 0)
    sim.hb("a", 1, {"t": {0, 1, 2, 3}}, rebalance_timeout_ms=2000)
    sim.advance(2000)
    assert "a" not in sim.group.members
    assert parts(sim.hb("b", 2, {})) == {0, 1, 2, 3}


def test_epoch_errors():
    sim = Sim()
    sim.hb("a", 0)
    assert sim.hb("a", 5, {}).error == ErrorCode.FENCED_MEMBER_EPOCH
    assert sim.hb("zz", 1, {}).error == ErrorCode.UNKNOWN_MEMBER_ID
    sim.hb("b", 0)
    sim.hb("a", 1, {"t": {0, 1, 2, 3}})
    kept = sim.group.members["a"].assigned["t"]
    sim.hb("a", 1, {"t": set(kept)})  # now epoch 2, previous 1
    # our last answer was lost: the previous epoch with a subset of its partitions is fine
    assert sim.hb("a", 1, {"t": set(kept)}).error == ErrorCode.NONE
    # but not with partitions it does not have
    assert sim.hb("a", 1, {"t": {0, 1, 2, 3}}).error == ErrorCode.FENCED_MEMBER_EPOCH


@pytest.mark.parametrize(("fields", "error"), [
    ({"rebalance_timeout_ms": -1}, ErrorCode.INVALID_REQUEST),
    ({"server_assignor": "sticky"}, ErrorCode.UNSUPPORTED_ASSIGNOR),
    ({"subscribed_regex": "t(", "subscribed_names": None}, ErrorCode.INVALID_REGULAR_EXPRESSION),
    ({"instance_id": ""}, ErrorCode.INVALID_REQUEST),
])
def test_invalid_joins(fields, error):
    sim = Sim()
    request = HeartbeatRequest(group_id="g", member_id="a", member_epoch=0,
                               rebalance_timeout_ms=1000, subscribed_names=["t"])
    for name, value in fields.items():
        setattr(request, name, value)
    replies = sim.apply(sim.machine.heartbeat(0, 1, request, sim.catalog))
    assert replies[0].error == error


def test_owned_partitions_when_joining_are_invalid():
    assert Sim().hb("a", 0, {"t": {1}}).error == ErrorCode.INVALID_REQUEST


def test_group_max_size_and_a_refused_first_join_creates_no_group():
    sim = Sim(max_size=1)
    assert sim.hb("a", 0).error == ErrorCode.NONE
    assert sim.hb("b", 0).error == ErrorCode.GROUP_MAX_SIZE_REACHED
    full = Sim(max_size=0)
    assert full.hb("a", 0).error == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert "g" not in full.machine.groups


def test_static_member_leaves_with_minus_two_and_comes_back():
    sim = Sim()
    first = sim.hb("a", 0, instance_id="i1")
    sim.hb("a", 1, {"t": parts(first)}, instance_id="i1")
    assert sim.hb("x", 0, instance_id="i1").error == ErrorCode.UNRELEASED_INSTANCE_ID
    left = sim.hb("a", -2, instance_id="i1")
    assert left.member_epoch == -2
    assert sim.group.group_epoch == 1  # no rebalance: the instance keeps its place
    back = sim.hb("a2", 0, instance_id="i1")
    assert back.error == ErrorCode.NONE and parts(back) == {0, 1, 2, 3}
    assert back.member_epoch == 1 and set(sim.group.members) == {"a2"}


def test_static_member_expires_after_its_session():
    sim = Sim(session_timeout_ms=1000)
    sim.hb("a", 0, instance_id="i1")
    sim.hb("a", -2, instance_id="i1")
    sim.advance(1000)
    assert not sim.group.members
    assert sim.group.state is GroupState.EMPTY


def test_new_partitions_trigger_a_new_assignment():
    sim = Sim()
    sim.hb("a", 0)
    sim.catalog.counts["t"] = 6
    r = sim.hb("a", 1, {"t": {0, 1, 2, 3}})
    assert r.member_epoch == 2 and parts(r) == set(range(6))


def test_regex_subscription_follows_created_topics():
    sim = Sim()
    r = sim.hb("a", 0, subscribed_regex="t.*", subscribed_names=None, version=1)
    assert set(r.assignment or {}) == {"t"}
    sim.catalog.counts["tx"] = 2
    sim.catalog.counts["other"] = 2
    r = sim.hb("a", 1, {"t": {0, 1, 2, 3}})
    assert r.assignment == {"t": {0, 1, 2, 3}, "tx": {0, 1}}


def test_range_assignor_when_asked_for():
    sim = Sim()
    r = sim.hb("a", 0, server_assignor="range")
    assert sim.group.assignor == "range" and parts(r) == {0, 1, 2, 3}


def test_uniform_is_balanced_and_sticky():
    subs = {m: frozenset({"t"}) for m in "abc"}
    first = uniform(subs, {"t": 7}, {})
    assert sorted(len(first[m]["t"]) for m in "abc") == [2, 2, 3]
    again = uniform(subs, {"t": 7}, first)
    assert again == first
    fewer = uniform({m: subs[m] for m in "ab"}, {"t": 7}, first)
    for m in "ab":  # the survivors keep what they had
        assert first[m]["t"] <= fewer[m]["t"]
    # different subscriptions: only subscribers get a topic's partitions
    mixed = uniform({"a": frozenset({"t", "u"}), "b": frozenset({"u"})}, {"t": 4, "u": 4}, {})
    assert "t" not in mixed["b"] and len(mixed["a"]["t"]) == 4


def test_range_assignor():
    out = range_({"a": frozenset({"t"}), "b": frozenset({"t"})}, {"t": 5}, {})
    assert out == {"a": {"t": {0, 1, 2}}, "b": {"t": {3, 4}}}


def test_commit_and_fetch_checks():
    sim = Sim()
    machine = sim.machine
    assert machine.validate_commit("other", "a", 1, 9) == NOT_A_CONSUMER_GROUP
    sim.hb("a", 0)
    assert machine.validate_commit("g", "a", 1, 9) is None
    assert machine.validate_commit("g", "a", 0, 9) == ErrorCode.STALE_MEMBER_EPOCH
    assert machine.validate_commit("g", "a", 1, 8) == ErrorCode.UNSUPPORTED_VERSION
    assert machine.validate_commit("g", "x", 1, 9) == ErrorCode.UNKNOWN_MEMBER_ID
    assert machine.validate_commit("g", "", -1, 9) == ErrorCode.UNKNOWN_MEMBER_ID  # not empty
    assert machine.validate_fetch("g", "a", 1) is None
    assert machine.validate_fetch("g", "a", 2) == ErrorCode.STALE_MEMBER_EPOCH
    assert machine.validate_fetch("g", None, -1) is None


def test_records_replay_to_the_same_group():
    sim = Sim()
    sim.hb("a", 0)
    sim.hb("b", 0, instance_id="ib")
    sim.hb("a", 1, {"t": {0, 1, 2, 3}})
    replay = ConsumerReplay()
    for key, value in sim.appended:
        replay.apply(key, value)
    [group] = replay.restore(0, sim.catalog)
    live = sim.group
    assert (group.group_epoch, group.assignment_epoch) == (live.group_epoch, live.assignment_epoch)
    for member_id, member in live.members.items():
        restored = group.members[member_id]
        assert (restored.epoch, restored.state, restored.assigned, restored.revoking,
                restored.instance_id, restored.subscribed_names) == \
            (member.epoch, member.state, member.assigned, member.revoking,
             member.instance_id, member.subscribed_names)
        assert group.target[member_id] == live.target[member_id]
    # a member that leaves is deleted by tombstones
    sim.hb("b", -1)
    replay = ConsumerReplay()
    for key, value in sim.appended:
        replay.apply(key, value)
    [group] = replay.restore(0, sim.catalog)
    assert set(group.members) == {"a"}


def _reloaded(sim: Sim) -> Sim:
    """A second machine (a restart, or the new coordinator after a failover) that loaded
    the group from the records the first one appended."""
    replay = ConsumerReplay()
    for key, value in sim.appended:
        replay.apply(key, value)
    other = Sim()
    other.catalog = sim.catalog
    [group] = replay.restore(0, other.catalog)
    other.apply(other.machine.adopt(0, group))
    return other


def test_a_loaded_group_keeps_its_epoch_while_its_topics_are_unchanged():
    """The group epoch record carries the subscribed topics' MetadataHash (Kafka 4.1):
    a member heartbeating with its epoch to the coordinator that loaded the group keeps
    that epoch, so its commits with it are accepted; topics changed meanwhile still
    bump the epoch on that first heartbeat."""
    sim = Sim()
    sim.hb("a", 0)
    sim.hb("b", 0)
    kept = parts(sim.hb("a", 1, {"t": {0, 1, 2, 3}}))  # a revokes half
    sim.hb("a", 1, {"t": kept})
    sim.hb("b", 2, {})
    assert {m: (x.epoch, x.state) for m, x in sim.group.members.items()} == \
        {"a": (2, MemberState.STABLE), "b": (2, MemberState.STABLE)}
    owned = {m: set(x.assigned["t"]) for m, x in sim.group.members.items()}

    loaded = _reloaded(sim)
    for member in ("a", "b"):
        r = loaded.hb(member, 2, owned[member])
        assert (r.error, r.member_epoch) == (ErrorCode.NONE, 2), r
        assert loaded.machine.validate_commit("g", member, 2, 9) is None
    assert loaded.group.group_epoch == 2

    grown = _reloaded(sim)
    grown.catalog.counts["t"] = 6  # while the group moved
    r = grown.hb("a", 2, owned["a"])
    assert r.member_epoch == 3 and grown.group.group_epoch == 3


def test_deleting_a_group_only_when_empty():
    sim = Sim()
    sim.hb("a", 0)
    error, _ = sim.machine.delete_group(0, "g", sim.catalog)
    assert error == ErrorCode.NON_EMPTY_GROUP
    sim.hb("a", -1)
    error, decisions = sim.machine.delete_group(0, "g", sim.catalog)
    assert error is None and "g" not in sim.machine.groups
    [append] = [d for d in decisions if isinstance(d, Append)]
    assert all(value is None for _, value in append.records)


def test_timer_kinds_are_the_consumer_ones():
    sim = Sim()
    sim.hb("a", 0)
    assert TimerKey(TimerKind.CONSUMER_SESSION, "g", "a") in sim.timers
