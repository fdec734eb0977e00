"""The cluster's sans-I/O parts: etcd keys and values, replica placement, leader
election, ISR changes and the leader's high watermark (logserver/cluster/model.py,
replication.py). No etcd, no sockets: these are pure decisions."""

from __future__ import annotations

import asyncio

from kafkaproto import ErrorCode
from logserver.cluster.local_topics import LocalTopicIds, classify
from logserver.cluster.model import (
    NO_LEADER,
    BrokerInfo,
    ClusterModel,
    Keys,
    PartitionState,
    TopicRecord,
    assign_replicas,
    elect_leader,
    high_watermark,
    initial_state,
    with_isr,
)
from logserver.cluster.replication import LeaderReplica


def test_model_applies_puts_and_deletes_from_the_watch():
    keys = Keys("/c")
    model = ClusterModel(keys)
    assert model.apply(keys.broker(2), BrokerInfo(2, "127.0.0.1", 9093, "r1").encode(), 5) == "brokers"
    model.apply(keys.controller, b'{"node_id": 2}', 6)
    model.apply(keys.topic("t"), TopicRecord("t", b"\x01" * 16, 1, {"a": "b"}).encode(), 7)
    state = PartitionState((2, 3), 2, 4, (2, 3), 9)
    model.apply(keys.partition("t", 0), state.encode(), 8)
    assert model.brokers[2] == BrokerInfo(2, "127.0.0.1", 9093, "r1")
    assert model.controller_id == 2
    assert model.topics["t"].configs == {"a": "b"} and model.topics["t"].topic_id == b"\x01" * 16
    assert model.partitions[("t", 0)].state == state and model.partitions[("t", 0)].mod_revision == 8
    assert model.topic_partitions("t") == [(0, state)]
    model.apply(keys.broker(2), None, 10)
    model.apply(keys.controller, None, 11)
    assert model.brokers == {} and model.controller_id is None and model.revision == 11
    assert model.apply(b"/other/brokers/1", b"{}", 12) is None  # another cluster's prefix


def test_replicas_spread_over_brokers_and_racks():
    brokers = [BrokerInfo(1, "h", 1, "a"), BrokerInfo(2, "h", 2, "a"),
               BrokerInfo(3, "h", 3, "b"), BrokerInfo(4, "h", 4, "b")]
    assignment = assign_replicas(brokers, 4, 2)
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    for replicas in assignment:
        assert len(set(replicas)) == 2
        assert {racks[r] for r in replicas} == {"a", "b"}  # never both replicas on one rack
    assert sorted(r[0] for r in assignment) == [1, 2, 3, 4]  # leaders evenly spread
    try:
        assign_replicas(brokers, 1, 5)
    except ValueError as exc:
        assert "replication factor 5" in str(exc)
    else:
        raise AssertionError("a replication factor above the broker count was accepted")


def test_dead_leader_is_replaced_from_the_isr_with_a_new_epoch():
    state = PartitionState((1, 2, 3), 1, 4, (1, 3), 7)
    new = elect_leader(state, live={2, 3})
    assert new == PartitionState((1, 2, 3), 3, 5, (3,), 8)  # 2 is alive but not in sync
    assert elect_leader(new, live={2, 3}) is None  # nothing to do


def test_no_live_isr_member_takes_the_partition_offline_unless_unclean():
    state = PartitionState((1, 2), 1, 0, (1,), 0)
    offline = elect_leader(state, live={2})
    assert offline is not None and offline.leader == NO_LEADER and offline.isr == (1,)
    assert offline.leader_epoch == 1
    back = elect_leader(offline, live={1, 2})
    assert back is not None and back.leader == 1 and back.leader_epoch == 2
    unclean = elect_leader(state, live={2}, unclean=True)
    assert unclean is not None and unclean.leader == 2 and unclean.isr == (2,)


def test_a_dead_follower_leaves_the_isr_and_the_leader_stays():
    state = initial_state((1, 2, 3))
    new = elect_leader(state, live={1, 3})
    assert new == PartitionState((1, 2, 3), 1, 0, (1, 3), 1)
    assert with_isr(new, [3, 1, 2]) == PartitionState((1, 2, 3), 1, 0, (1, 2, 3), 2)


def test_high_watermark_is_the_minimum_over_the_isr():
    assert high_watermark(1, 10, {2: 7, 3: 2}, (1, 2)) == 7  # 3 is not in the ISR
    assert high_watermark(1, 10, {}, (1, 2)) == 0  # a follower never heard from holds it back
    assert high_watermark(1, 10, {}, (1,)) == 10


def test_leader_replica_acks_only_once_the_isr_has_the_records():
    async def scenario() -> None:
        leader = LeaderReplica(1, initial_state((1, 2, 3)), hw=0, started_ms=0.0)
        acked = leader.wait_for(5)
        leader.advance(5)
        assert not acked.done()  # followers have nothing yet
        leader.follower_fetched(2, 5, 5, now_ms=10.0)
        leader.advance(5)
        assert not acked.done()  # 3 is in the ISR and still behind
        leader.follower_fetched(3, 5, 5, now_ms=10.0)
        assert leader.advance(5)
        assert acked.done() and acked.result() == ErrorCode.NONE and leader.hw == 5
        leader.follower_fetched(3, 2, 5, now_ms=20.0)  # a fetch from behind never lowers it
        assert not leader.advance(5) and leader.hw == 5
        waiting = leader.wait_for(9)
        leader.fail_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        assert waiting.result() == ErrorCode.NOT_LEADER_OR_FOLLOWER

    asyncio.run(scenario())


def test_isr_shrinks_after_the_lag_time_and_grows_when_caught_up():
    leader = LeaderReplica(1, initial_state((1, 2, 3)), hw=0, started_ms=0.0)
    leader.follower_fetched(2, 0, 0, now_ms=1000.0)
    assert leader.to_remove(now_ms=900.0, lag_max_ms=1000) == []  # a new leader waits
    assert leader.to_remove(now_ms=1500.0, lag_max_ms=1000) == [3]  # 2 caught up at 1000
    assert leader.to_remove(now_ms=2001.0, lag_max_ms=1000) == [2, 3]
    leader.update_state(with_isr(leader.state, [1]))
    leader.advance(4)
    assert leader.hw == 4 and leader.to_add() == []
    leader.follower_fetched(3, 4, 4, now_ms=2100.0)
    assert leader.to_add() == [3]


# -- stray local logs (cluster/local_topics.py) ---------------------------------------------

def test_stray_logs_are_those_gone_or_under_another_id() -> None:
    a, b, c = b"a" * 16, b"b" * 16, b"c" * 16
    verdicts = classify(["same", "gone", "again", "legacy", "foreign"],
                        cluster={"same": a, "again": c, "legacy": b},
                        recorded={"same": a, "gone": b, "again": a})
    assert verdicts.gone == ["gone"]
    assert verdicts.replaced == ["again"]
    assert verdicts.adopt == {"legacy": b}  # written before the records: the cluster's it is
    assert verdicts.unknown == ["foreign"]  # no word says it was ever the cluster's: kept


def test_local_topic_ids_trust_only_the_etcd_cluster_they_were_written_for(tmp_path) -> None:
    ids = LocalTopicIds(tmp_path)
    assert ids.bind("one")
    ids.remember("t", b"x" * 16)
    again = LocalTopicIds(tmp_path)
    assert again.ids == {"t": b"x" * 16}
    assert again.bind("one")
    assert not LocalTopicIds(tmp_path).bind("two")  # etcd wiped, or another prefix
    (tmp_path / "cluster-topic-ids").write_text("{not json")
    assert not LocalTopicIds(tmp_path).bind("one")
