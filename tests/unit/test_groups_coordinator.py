"""The group coordinator in-process (a Broker on a temporary data dir, no sockets): offset
retention with a controlled clock, the start-up rewrite of ``__consumer_offsets``, and
the pieces that must match Kafka byte for byte (record schema, group partitioning)."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

import pytest

from kafkaproto import ErrorCode
from logserver.broker import Broker
from logserver.config import load_config
from logserver.groups import records as rec
from logserver.groups import store as store_module
from logserver.groups.consumer.machine import HeartbeatRequest
from logserver.groups.coordinator import GroupCoordinator
from logserver.groups.group import CommittedOffset, parse_subscription_topics
from logserver.groups.store import OFFSETS_TOPIC, java_string_hash, kafka_partition_for

pytestmark = pytest.mark.timeout(60)

MINUTE = 60_000


def subscription(*topics: str) -> bytes:
    out = struct.pack(">hi", 1, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", 0) + struct.pack(">i", 0)  # user data, owned partitions (v1)


async def open_broker(data: Path, **settings: object) -> Broker:
    flags = {"log.dirs": str(data), "group.initial.rebalance.delay.ms": "0",
             "offsets.retention.minutes": "1", **{k: str(v) for k, v in settings.items()}}
    broker = Broker(load_config(flags, environ={}))
    broker.open()
    await broker.start()
    for _ in range(200):
        if not broker.groups.loading:
            break
        await asyncio.sleep(0.01)
    assert not broker.groups.loading
    return broker


async def commit(coordinator: GroupCoordinator, group: str, offsets: dict, now: int, *,
                 generation: int = -1, member: str = "", expire: int = -1) -> dict:
    return await coordinator.commit_offsets(
        group_id=group, member_id=member, group_instance_id=None, generation_id=generation,
        offsets={tp: CommittedOffset(o, 3, f"md-{o}", now, expire) for tp, o in offsets.items()})


async def join_and_sync(coordinator: GroupCoordinator, group: str, topics: tuple[str, ...]):
    joined = await coordinator.join_group(
        group_id=group, member_id="", group_instance_id=None, require_known_member_id=False,
        support_skip_assignment=False, client_id="c", client_host="", rebalance_timeout_ms=10_000,
        session_timeout_ms=10_000, protocol_type="consumer",
        protocols=[("range", subscription(*topics))], reason=None)
    assert joined.error == ErrorCode.NONE
    synced = await coordinator.sync_group(
        group_id=group, generation_id=joined.generation_id, member_id=joined.member_id,
        group_instance_id=None, protocol_type="consumer", protocol_name="range",
        assignments={joined.member_id: b""})
    assert synced.error == ErrorCode.NONE
    return joined


def fetched(coordinator: GroupCoordinator, group: str) -> dict:
    error, rows = coordinator.fetch_offsets(group, None, False)
    assert error == ErrorCode.NONE
    return {(t, p): (o, e, m) for t, p, o, e, m, _ in rows}


def test_offset_retention(tmp_path):
    """offsets.retention.minutes as Kafka applies it, and the tombstones survive a restart."""

    async def scenario() -> None:
        broker = await open_broker(tmp_path / "data")
        coordinator = broker.groups
        clock = [10 * MINUTE]
        coordinator.now_ms = lambda: clock[0]
        await broker.create_topic("t", 2, {})
        await broker.create_topic("u", 1, {})
        t0 = clock[0]
        # a group used only for offsets: retention counts from each commit
        assert await commit(coordinator, "simple", {("t", 0): 5}, t0) == {("t", 0): 0}
        # an explicit expiry (OffsetCommit v2-4 retention_time_ms) wins over the setting
        await commit(coordinator, "short", {("t", 0): 1}, t0, expire=t0 + 5_000)
        # a live consumer group keeps the offsets of topics it subscribes to
        member = await join_and_sync(coordinator, "live", ("t",))
        await commit(coordinator, "live", {("t", 0): 7, ("u", 0): 8}, t0,
                     generation=member.generation_id, member=member.member_id)
        # a consumer group that became empty: retention counts from when it became empty
        gone = await join_and_sync(coordinator, "emptied", ("t",))
        await commit(coordinator, "emptied", {("t", 1): 9}, t0,
                     generation=gone.generation_id, member=gone.member_id)
        clock[0] = t0 + 30_000
        coordinator.leave_group("emptied", [(gone.member_id, None, None)])
        assert coordinator.groups["emptied"].state.value == "Empty"

        clock[0] = t0 + 5_000
        assert coordinator.expire_offsets() == 1  # "short"
        assert "short" not in coordinator.groups
        clock[0] = t0 + MINUTE
        assert coordinator.expire_offsets() == 2  # "simple" and live's unsubscribed "u"
        assert "simple" not in coordinator.groups
        assert fetched(coordinator, "live") == {("t", 0): (7, 3, "md-7")}
        assert fetched(coordinator, "emptied") == {("t", 1): (9, 3, "md-9")}
        clock[0] = t0 + 30_000 + MINUTE
        assert coordinator.expire_offsets() == 1
        assert "emptied" not in coordinator.groups  # empty without offsets: Dead, forgotten
        await broker.close()

        broker = await open_broker(tmp_path / "data")
        coordinator = broker.groups
        assert set(coordinator.groups) == {"live"}
        assert fetched(coordinator, "live") == {("t", 0): (7, 3, "md-7")}
        await broker.close()

    asyncio.run(scenario())


def test_offsets_topic_is_rewritten_at_startup(tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "REWRITE_MIN_DEAD_RECORDS", 100)

    async def scenario() -> None:
        data = tmp_path / "data"
        broker = await open_broker(data, **{"offsets.topic.segment.bytes": 4096})
        coordinator = broker.groups
        await broker.create_topic("t", 2, {})
        assert await coordinator.ensure_offsets_topic() is None
        for i in range(300):
            await commit(coordinator, "busy", {("t", 0): i, ("t", 1): 1000 + i}, i)
        await join_and_sync(coordinator, "members", ("t",))
        log_ = broker.storage.manager.get_log(OFFSETS_TOPIC, 0)
        assert log_.log_start_offset == 0 and len(log_.segments) > 3
        records_before = sum(1 for _ in coordinator.store.iter_log(0))
        await broker.close()

        broker = await open_broker(data, **{"offsets.topic.segment.bytes": 4096})
        coordinator = broker.groups
        assert broker.storage.log_start_offset(OFFSETS_TOPIC, 0) > 0
        records_after = sum(1 for _ in coordinator.store.iter_log(0))
        assert records_after == 3 < records_before  # 2 offsets and 1 group
        assert fetched(coordinator, "busy") == {("t", 0): (299, 3, "md-299"),
                                               ("t", 1): (1299, 3, "md-1299")}
        assert coordinator.groups["members"].state.value == "Stable"
        await broker.close()

        broker = await open_broker(data, **{"offsets.topic.segment.bytes": 4096})
        assert fetched(broker.groups, "busy")[("t", 1)] == (1299, 3, "md-1299")
        assert len(broker.groups.groups["members"].members) == 1
        await broker.close()

    asyncio.run(scenario())


def test_group_partition_matches_kafka():
    # String.hashCode: well-known values, and one over a UTF-16 surrogate pair
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Hello World") == -862545276
    assert java_string_hash("\U0001F600") == 31 * 0xD83D + 0xDE00
    # Utils.abs(hash) % 50, as Kafka places groups on __consumer_offsets partitions
    assert (java_string_hash("Hello World") & 0x7FFFFFFF) % 50 == 22


def test_cluster_places_groups_as_kafka_does():
    """Kafka's Utils.abs(hashCode) % partitions (values printed by Java 17): negative
    hash codes are negated, Integer.MIN_VALUE goes to partition 0."""
    assert kafka_partition_for("polygenelubricants", 50) == 0  # hashCode is MIN_VALUE
    assert kafka_partition_for("survivors", 50) == 7
    assert kafka_partition_for("my-group", 50) == 12  # hashCode -1906497762
    assert kafka_partition_for("consumer-group-7", 50) == 26
    assert kafka_partition_for("gr\u00fcppe", 50) == 12


def test_record_schema_roundtrip():
    key = rec.offset_key("g", "topic", 7)
    assert key == b"\x00\x01\x00\x01g\x00\x05topic\x00\x00\x00\x07"
    assert rec.parse_key(key) == rec.OffsetKey("g", "topic", 7)
    assert rec.parse_key(rec.group_key("g")) == rec.GroupKey("g")
    value = rec.OffsetValue(42, 5, "meta", 1234)
    encoded = rec.offset_value(value)
    assert encoded[:2] == b"\x00\x03"
    assert rec.parse_offset_value(encoded) == value
    with_expiry = rec.OffsetValue(42, -1, "", 1234, 9999)
    assert rec.offset_value(with_expiry)[:2] == b"\x00\x01"
    assert rec.parse_offset_value(rec.offset_value(with_expiry)) == with_expiry
    group = rec.GroupValue("consumer", 3, "range", "m1", 777, [
        rec.MemberValue("m1", "i1", "client", "/127.0.0.1", 30000, 10000, b"sub", b"asg"),
        rec.MemberValue("m2", None, "client", "/127.0.0.1", 30000, 10000, b"", b"")])
    assert rec.parse_group_value(rec.group_value(group)) == group
    with pytest.raises(rec.RecordFormatError):
        rec.parse_group_value(rec.group_value(group)[:-3])


def test_subscription_topics_of_every_consumer_protocol_version():
    assert parse_subscription_topics(subscription("a", "b")) == {"a", "b"}
    v0 = struct.pack(">hi", 0, 1) + struct.pack(">h", 1) + b"x" + struct.pack(">i", -1)
    assert parse_subscription_topics(v0) == {"x"}
    assert parse_subscription_topics(b"\x00") is None


def test_deleted_topics_take_their_offsets_along(tmp_path):
    async def scenario() -> None:
        data = tmp_path / "data"
        broker = await open_broker(data)
        coordinator = broker.groups
        await broker.create_topic("keep", 1, {})
        await broker.create_topic("drop", 1, {})
        await commit(coordinator, "g", {("keep", 0): 1, ("drop", 0): 2}, 0)
        await commit(coordinator, "only-drop", {("drop", 0): 3}, 0)
        await broker.delete_topic("drop")
        assert fetched(coordinator, "g") == {("keep", 0): (1, 3, "md-1")}
        assert "only-drop" not in coordinator.groups
        # even the internal topic: the live state is written to a new one
        await broker.delete_topic(OFFSETS_TOPIC)
        assert broker.storage.partition_count(OFFSETS_TOPIC) == 1
        await broker.close()

        broker = await open_broker(data)
        assert set(broker.groups.groups) == {"g"}
        assert fetched(broker.groups, "g") == {("keep", 0): (1, 3, "md-1")}
        await broker.close()

    asyncio.run(scenario())


def test_answers_while_loading(tmp_path):
    """Before the replay is done: FindCoordinator says COORDINATOR_NOT_AVAILABLE, group
    APIs what Kafka says while loading."""

    async def scenario() -> None:
        broker = Broker(load_config({"log.dirs": str(tmp_path / "data")}, environ={}))
        broker.open()
        await broker.start()  # the replay task has not run yet
        coordinator = broker.groups
        assert coordinator.loading
        assert (await coordinator.find_coordinator(0))[0] == ErrorCode.COORDINATOR_NOT_AVAILABLE
        joined = coordinator.join_group(
            group_id="g", member_id="", group_instance_id=None, require_known_member_id=True,
            support_skip_assignment=False, client_id="c", client_host="",
            rebalance_timeout_ms=10_000, session_timeout_ms=10_000, protocol_type="consumer",
            protocols=[("range", b"")], reason=None)
        assert joined.result().error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        synced = coordinator.sync_group(group_id="g", generation_id=1, member_id="m",
                                        group_instance_id=None, protocol_type=None,
                                        protocol_name=None, assignments={})
        assert synced.result().error == ErrorCode.REBALANCE_IN_PROGRESS
        assert coordinator.heartbeat(group_id="g", member_id="m", group_instance_id=None,
                                     generation_id=1) == ErrorCode.NONE
        assert coordinator.fetch_offsets("g", None, False)[0] == \
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert coordinator.list_groups([])[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        await asyncio.sleep(0.05)
        assert not coordinator.loading
        assert (await coordinator.find_coordinator(0))[0] == ErrorCode.NONE
        await broker.close()

    asyncio.run(scenario())

async def _partitioned(tmp_path) -> tuple:  # type: ignore[no-untyped-def]
    """A broker whose group coordinator runs as a cluster broker's does: it serves only
    the ``__consumer_offsets`` partitions (4 here) it is told to load."""
    broker = await open_broker(tmp_path / "data", **{"offsets.topic.num.partitions": 4})
    assert await broker.groups.ensure_offsets_topic() is None
    await broker.groups.close()
    coordinator = broker.groups = GroupCoordinator(broker)
    coordinator.start_partitioned()
    return broker, coordinator


async def _load(coordinator: GroupCoordinator, partition: int) -> None:
    coordinator.load_partition(partition)
    for _ in range(200):
        if coordinator.owned is not None and partition in coordinator.owned:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"partition {partition} not loaded")


def test_cluster_mode_serves_only_the_partitions_it_loads(tmp_path):
    """What a cluster broker's coordinator does as leaderships of ``__consumer_offsets``
    partitions come and go: NOT_COORDINATOR for groups of partitions not led here, a
    loaded partition's groups (offsets and members) back from its log, an unloaded one's
    dropped (their parked requests answered NOT_COORDINATOR)."""

    async def scenario() -> None:
        broker, coordinator = await _partitioned(tmp_path)
        mine, other = "group-a", next(g for g in (f"group-{i}" for i in range(100))
                                      if kafka_partition_for(g, 4) != kafka_partition_for("group-a", 4))
        where = kafka_partition_for(mine, 4)
        now = coordinator.now_ms()
        tp = ("t", 0)
        assert (await commit(coordinator, mine, {tp: 5}, now))[tp] == ErrorCode.NOT_COORDINATOR

        await _load(coordinator, where)
        assert (await commit(coordinator, mine, {tp: 5}, now))[tp] == ErrorCode.NONE
        assert (await commit(coordinator, other, {tp: 1}, now))[tp] == ErrorCode.NOT_COORDINATOR
        member = (await join_and_sync(coordinator, mine, ("t",))).member_id

        coordinator.unload_partition(where)
        assert mine not in coordinator.groups
        assert coordinator.fetch_offsets(mine, None, False)[0] == ErrorCode.NOT_COORDINATOR
        assert coordinator.heartbeat(group_id=mine, member_id=member, group_instance_id=None,
                                     generation_id=1) == ErrorCode.NOT_COORDINATOR

        await _load(coordinator, where)  # led here again: everything back from the log
        assert fetched(coordinator, mine)[tp][0] == 5
        error, group = coordinator.describe_group(mine)
        assert error == ErrorCode.NONE and group is not None and list(group.members) == [member]
        await coordinator.close()
        await broker.close()

    asyncio.run(scenario())


def test_cluster_mode_loads_and_unloads_consumer_protocol_groups(tmp_path):
    """A KIP-848 group follows its ``__consumer_offsets`` partition: unloaded with it
    (not served, not listed, no timers left) and back from its log when it is loaded
    again, its member at the epoch it had, so that member's heartbeat and commit with
    that epoch are accepted (Kafka's coordinator replays the group's records on load)."""

    async def scenario() -> None:
        broker, coordinator = await _partitioned(tmp_path)
        group, where = "kip848-group", kafka_partition_for("kip848-group", 4)


        def heartbeat(epoch: int) -> HeartbeatRequest:
            return HeartbeatRequest(group, "m1", epoch, rebalance_timeout_ms=30_000,
                                    subscribed_names=["t"], owned={})

        await _load(coordinator, where)
        joined = await coordinator.consumer_group_heartbeat(heartbeat(0))
        assert (joined.error, joined.member_epoch) == (ErrorCode.NONE, 1)
        assert (await commit(coordinator, group, {("t", 0): 5}, coordinator.now_ms(),
                             generation=1, member="m1"))[("t", 0)] == ErrorCode.NONE

        coordinator.unload_partition(where)
        assert coordinator.consumer.describe(group) is None
        assert group not in [g for g, *_ in coordinator.list_groups([])[1]]
        assert (await coordinator.consumer_group_heartbeat(heartbeat(1))).error == \
            ErrorCode.NOT_COORDINATOR

        await _load(coordinator, where)  # led here again: the group back from the log, epochs included
        restored = coordinator.consumer.describe(group)
        assert restored is not None and restored.group_epoch == 1
        assert [(m.member_id, m.epoch) for m in restored.members.values()] == [("m1", 1)]
        again = await coordinator.consumer_group_heartbeat(heartbeat(1))
        assert (again.error, again.member_epoch) == (ErrorCode.NONE, 1)
        assert (await commit(coordinator, group, {("t", 0): 6}, coordinator.now_ms(),
                             generation=1, member="m1"))[("t", 0)] == ErrorCode.NONE
        await coordinator.close()
        await broker.close()

    asyncio.run(scenario())
