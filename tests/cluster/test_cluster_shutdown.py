"""Controlled shutdown in cluster mode: a SIGTERM'd broker first moves its leaderships
to other in-sync replicas and leaves every ISR (compare-and-swaps in etcd), then closes
its listeners. The decision is checked pure; the whole against real processes (Debian's
etcd, three logserver brokers, an idempotent acks=all confluent-kafka producer)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import NewTopic
from helpers.cluster_clients import ContinuousProducer, consume_all
from helpers.waiting import wait_until

from logserver.cluster.model import PartitionState
from logserver.cluster.shutdown import without_replica


def test_a_led_partition_moves_to_the_first_live_isr_member():
    state = PartitionState((1, 2, 3), 1, 4, (1, 2, 3), 7)
    assert without_replica(state, 1, {1, 2, 3}) == PartitionState((1, 2, 3), 2, 5, (2, 3), 8)
    assert without_replica(state, 1, {1, 3}) == PartitionState((1, 2, 3), 3, 5, (2, 3), 8)


def test_a_partition_with_no_other_live_isr_member_stays():
    alone = PartitionState((1, 2, 3), 1, 4, (1,), 7)
    assert without_replica(alone, 1, {1, 2, 3}) is None  # 2 and 3 are not in sync
    assert without_replica(PartitionState((1, 2), 1, 4, (1, 2), 7), 1, {1}) is None


def test_a_follower_leaves_the_isr_unless_it_is_the_last_member():
    state = PartitionState((1, 2, 3), 2, 4, (1, 2, 3), 7)
    assert without_replica(state, 3, {1, 2, 3}) == PartitionState((1, 2, 3), 2, 4, (1, 2), 8)
    assert without_replica(PartitionState((1, 2, 3), 2, 4, (1, 2), 7), 3, {1, 2, 3}) is None
    assert without_replica(PartitionState((2, 3), -1, 4, (3,), 7), 3, {3}) is None


@pytest.mark.slow
def test_sigterm_moves_leaderships_before_the_broker_exits(cluster):
    admin = cluster.admin()
    for topic, count in (("cs", 1), ("cs3", 3)):
        admin.create_topics([NewTopic(topic, count, 3)])[topic].result(timeout=20)
        wait_until(lambda t=topic, c=count: all(
            (p := cluster.partition(t, i)) is not None and len(p.isrs) == 3 for i in range(c)),
            30, f"{topic} in sync")
    producer = ContinuousProducer("confluent-kafka", cluster.bootstrap, "cs")
    with producer:
        wait_until(lambda: len(producer.acked) > 50, 60, "records acknowledged")
        node = cluster.partition("cs", 0).leader
        led = {(t, i): cluster.partition(t, i) for t, c in (("cs", 1), ("cs3", 3))
               for i in range(c) if cluster.partition(t, i).leader == node}
        broker = cluster.brokers[node]
        before = len(producer.acked)
        stopped_at = time.monotonic()
        assert broker.stop() == 0
        wait_until(lambda: len(producer.acked) > before + 50, 60, "records acknowledged after")
        gap = _longest_gap(producer, stopped_at)
        print(f"longest gap between acknowledgements around the SIGTERM: {gap * 1000:.0f} ms")
        out = broker.output()
        moved = [line for line in out.splitlines() if "controlled shutdown: moved leadership" in line]
        assert len(moved) == 1, out[-3000:]
        assert out.index(moved[0]) < out.index("shutting down: no new connections")
        for (topic, index), old in led.items():
            assert f"{topic}-{index}->" in moved[0], (topic, index, moved[0])
            now = cluster.partition(topic, index)
            assert now.leader != node and now.leader in old.isrs
            assert node not in now.isrs
        broker.start()
        wait_until(lambda: len(cluster.partition("cs", 0).isrs) == 3, 60, "the broker back in sync")
    assert not producer.failed, producer.failed[:5]
    records = consume_all(cluster.bootstrap, "cs", len(producer.acked), timeout=60)
    values = [value for _, value in records]
    assert [offset for offset, _ in records] == list(range(len(records)))
    assert len(set(values)) == len(values) and set(producer.acked) <= set(values)


def _longest_gap(producer: ContinuousProducer, since: float) -> float:
    """Longest pause between two acknowledgements after ``since`` (the producer keeps the
    times when the test asks it to; here measured from its ack count over time)."""
    return max((b - a for a, b in zip(producer.ack_times, producer.ack_times[1:], strict=False)
                if b >= since), default=0.0)
