"""Replaying ``__consumer_offsets`` records into groups (logserver/groups/loading.py),
record by record without a broker: last value wins, null deletes, junk is skipped."""

from __future__ import annotations

from kafkaproto import ErrorCode
from logserver.groups import loading
from logserver.groups import records as rec
from logserver.groups.membership import Membership
from logserver.groups.store import LogEntry


def entries(*records: tuple[bytes | None, bytes | None]) -> list[LogEntry]:
    return [LogEntry(offset, 1000 + offset, key, value)
            for offset, (key, value) in enumerate(records)]


def offset(value: int) -> bytes:
    return rec.offset_value(rec.OffsetValue(value, 1, f"md-{value}", 500))


def test_replay_restores_the_live_state():
    members = [rec.MemberValue("m1", "i1", "c", "/h", 30_000, 10_000, b"sub", b"asg")]
    group_value = rec.group_value(rec.GroupValue("consumer", 4, "range", "m1", 777, members))
    empty_value = rec.group_value(rec.GroupValue("consumer", 2, None, None, 888, []))
    replay = loading.Replay()
    for entry in entries(
            (rec.offset_key("g", "t", 0), offset(1)),
            (rec.offset_key("g", "t", 0), offset(2)),  # the last value wins
            (rec.offset_key("g", "t", 1), offset(3)),
            (rec.offset_key("g", "t", 1), None),  # a tombstone deletes
            (rec.offset_key("gone", "t", 0), offset(4)),
            (rec.offset_key("gone", "t", 0), None),
            (rec.group_key("live"), group_value),
            (rec.group_key("was-empty"), empty_value),
            (b"\x00\x01\x00", offset(5)),  # unreadable: skipped
            (None, b"no key"),
            (rec.group_key("deleted"), empty_value),
            (rec.group_key("deleted"), None)):
        replay.apply(0, entry)
    assert replay.records == 12
    membership = Membership()
    groups = {g.group_id: g for g in replay.restore(5_000, membership.new_group)}
    assert set(groups) == {"g", "live", "was-empty"}
    committed = groups["g"].offsets[("t", 0)]
    assert (committed.offset, committed.metadata, committed.log_offset) == (2, "md-2", 1)
    assert groups["g"].state.value == "Empty" and groups["g"].protocol_type is None
    live = groups["live"]
    assert (live.state.value, live.generation_id, live.leader_id, live.protocol_name,
            live.state_timestamp) == ("Stable", 4, "m1", "range", 777)
    assert live.members["m1"].assignment == b"asg"
    assert live.static_members == {"i1": "m1"}
    assert live.persisted_value == group_value
    assert groups["was-empty"].state.value == "Empty"
    # a restored member must heartbeat again within its session timeout
    decisions = membership.adopt(5_000, live)
    assert [(d.key.member_id, d.delay_ms) for d in decisions] == [("m1", 10_000)]
    assert membership.heartbeat(5_000, group_id="live", member_id="m1",
                                group_instance_id="i1", generation_id=4)[0] == ErrorCode.NONE


def test_snapshot_holds_one_record_per_live_key():
    replay = loading.Replay()
    for entry in entries((rec.offset_key("a", "t", 0), offset(1)),
                         (rec.offset_key("a", "t", 0), offset(2)),
                         (rec.offset_key("b", "t", 0), offset(3))):
        replay.apply(0, entry)
    groups = replay.restore(0, Membership().new_group)
    assert loading.live_records(groups) == 2
    snapshot = loading.snapshot(groups, lambda group_id: {"a": 0, "b": 1}[group_id])
    assert {p: [(rec.parse_key(k), rec.parse_offset_value(v).offset) for k, v, _ in records]
            for p, records in snapshot.items()} == {
        0: [(rec.OffsetKey("a", "t", 0), 2)], 1: [(rec.OffsetKey("b", "t", 0), 3)]}
