"""Committed offsets (logserver/groups/offsets.py) without a broker or an event loop:
visible only once durable, deleted with tombstones, expired as Kafka expires them."""

from __future__ import annotations

from helpers.groupsim import Sim

from kafkaproto import ErrorCode
from logserver.groups import records as rec
from logserver.groups.decisions import Reply
from logserver.groups.group import CommittedOffset
from logserver.groups.offsets import OffsetSettings

MINUTE = 60_000


def commit(sim: Sim, group: str, offsets: dict[tuple[str, int], int], *,
           metadata: str = "md", expire: int = -1) -> int:
    """An OffsetCommit outside group management; returns its request id."""
    error, found, decisions = sim.membership.accept_commit(
        sim.now, group_id=group, member_id="", group_instance_id=None, generation_id=-1)
    assert error is None and found is not None
    sim.apply(decisions)
    request = sim.request()
    sim.apply(sim.offsets.commit(sim.now, request, found, {
        tp: CommittedOffset(o, 2, metadata, sim.now, expire) for tp, o in offsets.items()}))
    return request


def fetched(sim: Sim, group: str, partitions=None, require_stable: bool = False) -> dict:
    return {(t, p): (o, err) for t, p, o, _, _, err in
            sim.offsets.fetch(group, partitions, require_stable)}


def test_a_commit_is_visible_only_once_durable():
    sim = Sim()
    request = commit(sim, "g", {("t", 0): 5, ("t", 1): 6})
    (append,) = sim.appends
    assert [rec.parse_key(k) for k, _ in append.records] == [
        rec.OffsetKey("g", "t", 0), rec.OffsetKey("g", "t", 1)]
    assert request not in sim.replies
    assert fetched(sim, "g") == {}
    assert fetched(sim, "g", [("t", 0)], require_stable=True) == \
        {("t", 0): (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)}
    sim.complete(base_offset=40)
    assert sim.reply(request) == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.NONE}
    assert fetched(sim, "g") == {("t", 0): (5, 0), ("t", 1): (6, 0)}
    assert sim.group("g").offsets[("t", 1)].log_offset == 41
    assert fetched(sim, "g", [("t", 0), ("t", 9)]) == {("t", 0): (5, 0), ("t", 9): (-1, 0)}


def test_a_failed_commit_is_reported_and_not_applied():
    sim = Sim()
    commit(sim, "g", {("t", 0): 5})
    sim.complete()
    request = commit(sim, "g", {("t", 0): 6})
    sim.complete(ErrorCode.NOT_COORDINATOR)
    assert sim.reply(request) == {("t", 0): ErrorCode.NOT_COORDINATOR}
    assert fetched(sim, "g") == {("t", 0): (5, 0)}
    assert not sim.group("g").pending_commits


def test_durable_commits_apply_in_log_order():
    sim = Sim()
    first, second = commit(sim, "g", {("t", 0): 1}), commit(sim, "g", {("t", 0): 2})
    sim.complete(index=1, base_offset=11)  # the later append becomes durable first
    sim.complete(index=0, base_offset=10)
    assert sim.reply(first) == sim.reply(second) == {("t", 0): ErrorCode.NONE}
    assert fetched(sim, "g") == {("t", 0): (2, 0)}


def test_metadata_too_large():
    sim = Sim(offset_settings=OffsetSettings(metadata_max_bytes=4))
    request = commit(sim, "g", {("t", 0): 1}, metadata="12345")
    assert not sim.appends
    assert sim.reply(request) == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE}


def test_delete_groups_answers_once_the_tombstones_are_durable():
    sim = Sim()
    commit(sim, "gone", {("t", 0): 1})
    sim.complete()
    request = sim.request()
    sim.apply(sim.offsets.delete_groups(sim.now, request, [
        ("gone", None), ("unknown", None), ("bad", ErrorCode.INVALID_GROUP_ID)]))
    assert "gone" not in sim.membership.groups
    (append,) = sim.appends
    assert append.records == ((rec.offset_key("gone", "t", 0), None),)
    assert request not in sim.replies
    sim.complete()
    assert sim.reply(request) == [("gone", ErrorCode.NONE),
                                  ("unknown", ErrorCode.GROUP_ID_NOT_FOUND),
                                  ("bad", ErrorCode.INVALID_GROUP_ID)]


def test_a_commit_in_flight_does_not_bring_back_a_deleted_group():
    sim = Sim()
    commit(sim, "g", {("t", 0): 1})
    sim.complete()
    late = commit(sim, "g", {("t", 0): 2})
    sim.apply(sim.offsets.delete_groups(sim.now, sim.request(), [("g", None)]))
    sim.complete(index=0)  # the commit becomes durable after the delete
    assert sim.reply(late) == {("t", 0): ErrorCode.NONE}
    assert "g" not in sim.membership.groups and fetched(sim, "g") == {}


def test_delete_offsets_of_a_live_group_keeps_subscribed_topics():
    sim = Sim()
    subscription = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"  # v0, topic "t"
    join = sim.join("g", protocols=[("range", subscription)])
    sim.advance(0)
    member = sim.reply(join).member_id
    sim.sync("g", 1, member, {member: b""})
    sim.complete()
    error, group, _ = sim.membership.accept_commit(
        sim.now, group_id="g", member_id=member, group_instance_id=None, generation_id=1)
    assert error is None and group is not None
    sim.apply(sim.offsets.commit(sim.now, sim.request(), group, {
        ("t", 0): CommittedOffset(1, -1, "", sim.now), ("u", 0): CommittedOffset(2, -1, "", sim.now)}))
    sim.complete()
    request = sim.request()
    sim.apply(sim.offsets.delete_offsets(sim.now, request, "g", [("t", 0), ("u", 0)]))
    sim.complete()
    assert sim.reply(request) == (ErrorCode.NONE, {("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
                                                   ("u", 0): ErrorCode.NONE})
    assert fetched(sim, "g") == {("t", 0): (1, 0)}
    missing = sim.request()
    assert sim.offsets.delete_offsets(sim.now, missing, "nope", []) == \
        [Reply(missing, (ErrorCode.GROUP_ID_NOT_FOUND, {}))]


def test_expiry_of_a_simple_group_and_explicit_expire_timestamps():
    sim = Sim(offset_settings=OffsetSettings(retention_ms=MINUTE))
    commit(sim, "simple", {("t", 0): 1})
    commit(sim, "short", {("t", 0): 1}, expire=sim.now + 5_000)
    sim.complete_all()
    sim.now += 5_000
    removed, decisions = sim.offsets.expire(sim.now)
    sim.apply(decisions)
    assert removed == 1 and "short" not in sim.membership.groups
    sim.now += MINUTE
    removed, decisions = sim.offsets.expire(sim.now)
    sim.apply(decisions)
    assert removed == 1 and "simple" not in sim.membership.groups
    assert [a.records for a in sim.appends] == [((rec.offset_key("short", "t", 0), None),),
                                                ((rec.offset_key("simple", "t", 0), None),)]


def test_deleted_topic_takes_its_offsets_along():
    sim = Sim()
    commit(sim, "g", {("keep", 0): 1, ("drop", 0): 2})
    commit(sim, "only-drop", {("drop", 0): 3})
    sim.complete_all()
    removed, decisions = sim.offsets.on_topic_deleted(sim.now, "drop")
    sim.apply(decisions)
    assert removed == 2
    assert fetched(sim, "g") == {("keep", 0): (1, 0)}
    assert "only-drop" not in sim.membership.groups
