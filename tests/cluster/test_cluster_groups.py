"""Consumer groups in cluster mode, against real processes: Debian's etcd, three logserver
brokers and confluent-kafka consumers. ``__consumer_offsets`` has Kafka's 50 partitions
spread over the brokers; a group's coordinator is the leader of its partition, and when
that broker dies the partition's new leader loads the group from its replica."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from helpers.clusterprocs import Cluster
from helpers.kafkaclient import BlockingClient
from helpers.waiting import wait_until

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import FindCoordinatorRequest
from logserver.groups.store import kafka_partition_for

pytestmark = pytest.mark.slow

OFFSETS = "__consumer_offsets"


def _create(cluster: Cluster, topic: str, partitions: int) -> None:
    admin = cluster.admin()
    admin.create_topics([NewTopic(topic, partitions, 3)])[topic].result(timeout=20)
    wait_until(lambda: all((p := cluster.partition(topic, i)) is not None and len(p.isrs) == 3
                           for i in range(partitions)), 30, f"{topic} in sync")


def test_offsets_topic_has_kafkas_layout_and_coordinators_spread(cluster):
    """50 partitions, 3 replicas each, leaders on every broker; FindCoordinator names the
    leader of the group's partition, whichever broker is asked."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "layout"})
    try:  # the first FindCoordinator creates the topic
        wait_until(lambda: _try_committed(consumer, "layout-topic") is not None, 60,
                   "the group coordinator to answer")
    finally:
        consumer.close()
    meta = wait_until(lambda: (t := cluster.metadata().topics.get(OFFSETS)) is not None
                      and len(t.partitions) == 50
                      and all(len(p.isrs) == 3 for p in t.partitions.values()) and t, 60,
                      f"{OFFSETS} with 50 partitions in sync")
    leaders = {p.leader for p in meta.partitions.values()}
    assert leaders == {1, 2, 3}, leaders  # coordinators spread over every broker
    _assert_find_coordinator(cluster, meta)


def _assert_find_coordinator(cluster: Cluster, meta) -> None:
    """FindCoordinator, raw (our sans-I/O client core), at every broker: the leader of
    the group's partition."""
    groups = ["layout", "my-group", "polygenelubricants", "survivors", "grüppe"]
    for broker in cluster.brokers.values():
        client = BlockingClient(broker.port)
        try:
            response = client.call(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
                key_type=0, coordinator_keys=groups))
        finally:
            client.close()
        for group, answer in zip(groups, response.coordinators, strict=True):
            assert answer.error_code == ErrorCode.NONE, (group, answer)
            assert answer.node_id == meta.partitions[kafka_partition_for(group, 50)].leader


def _try_committed(consumer: Consumer, topic: str) -> list | None:
    try:
        return consumer.committed([TopicPartition(topic, 0)], timeout=5)
    except KafkaException:
        return None


class GroupMember:
    """A confluent-kafka group member in its own thread: auto-commit every 200 ms;
    records what it consumed and every commit the coordinator acknowledged."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str,
                 consumed: list[tuple[int, int, bytes]], commits: list[tuple[float, int, int]],
                 lock: threading.Lock) -> None:
        self.name, self.topic = name, topic
        self.consumed, self.commits, self.lock = consumed, commits, lock
        self.assigned: set[int] = set()
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
            "enable.auto.commit": True, "auto.commit.interval.ms": 200,
            # A group whose offsets were lost would jump to the end: a skip this test sees.
            "auto.offset.reset": "latest", "on_commit": self._committed})
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _committed(self, err, partitions) -> None:
        if err is not None:
            return
        now = time.monotonic()
        with self.lock:
            for tp in partitions:
                if tp.error is None and tp.offset >= 0:
                    self.commits.append((now, tp.partition, tp.offset))

    def _assigned(self, _consumer, partitions) -> None:
        self.assigned = {tp.partition for tp in partitions}

    def _revoked(self, _consumer, _partitions) -> None:
        self.assigned = set()

    def _run(self) -> None:
        self.consumer.subscribe([self.topic], on_assign=self._assigned, on_revoke=self._revoked)
        while not self.stop.is_set():
            message = self.consumer.poll(0.1)
            if message is None:
                continue
            if message.error() is not None:
                self.errors.append(str(message.error()))
                continue
            with self.lock:
                self.consumed.append((message.partition(), message.offset(), message.value()))
        self.consumer.close()  # commits what was consumed and leaves the group

    def start(self) -> GroupMember:
        self.thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        self.thread.join(60)
        assert not self.thread.is_alive(), f"{self.name} did not stop"


def test_group_keeps_consuming_through_a_coordinator_kill9_and_skips_nothing(cluster):
    """Two members consume a 3-partition topic while an idempotent acks=all producer
    writes; the coordinator (leader of the group's __consumer_offsets partition) is
    killed with kill -9. Its new leader loads the group from the replicated log; then one
    member leaves, so the other takes over its partitions from the committed offsets the
    new coordinator has. Every acknowledged record is consumed, and no acknowledged
    commit ever covered a record nobody consumed."""
    topic, group, partitions = "gflow", "flow-group", 3
    _create(cluster, topic, partitions)
    # The group starts at offset 0 on every partition, committed beforehand, so that
    # "latest" (the reset the members use) only ever applies to lost offsets.
    starter = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    try:
        wait_until(lambda: _commit_start(starter, topic, partitions), 60,
                   "the starting offsets committed")
    finally:
        starter.close()
    where = kafka_partition_for(group, 50)
    coordinator = cluster.partition(OFFSETS, where).leader
    assert coordinator in cluster.brokers

    acked: list[bytes] = []
    produce_errors: list[str] = []
    stop_producing = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5,
                             "message.timeout.ms": 120000})

        def delivered(err, message) -> None:
            (produce_errors.append(str(err)) if err is not None else acked.append(message.value()))

        i = 0
        while not stop_producing.is_set():
            producer.produce(topic, value=b"%07d" % i, partition=i % partitions,
                             on_delivery=delivered)
            producer.poll(0.005)
            i += 1
        assert producer.flush(120) == 0

    lock = threading.Lock()
    consumed: list[tuple[int, int, bytes]] = []
    commits: list[tuple[float, int, int]] = []
    producer_thread = threading.Thread(target=produce, name="producer", daemon=True)
    members = [GroupMember(name, cluster.bootstrap, group, topic, consumed, commits, lock)
               for name in ("member-a", "member-b")]
    producer_thread.start()
    try:
        for member in members:
            member.start()
        wait_until(lambda: all(m.assigned for m in members)
                   and {p for m in members for p in m.assigned} == set(range(partitions)), 90,
                   "both members to share the partitions")
        _wait_for_commits(commits, lock, since=time.monotonic(), what="commits before the kill")

        cluster.brokers[coordinator].kill9()
        killed_at = time.monotonic()
        wait_until(lambda: (p := cluster.partition(OFFSETS, where)) is not None
                   and p.leader not in (-1, coordinator), 30, "a new coordinator")
        # Commits flow again, through the new coordinator.
        _wait_for_commits(commits, lock, since=killed_at + 0.5, what="commits after the failover")

        # One member leaves: the other takes every partition from the committed offsets.
        members[1].close()
        wait_until(lambda: members[0].assigned == set(range(partitions)), 90,
                   "the remaining member to own every partition")
        _wait_for_commits(commits, lock, since=time.monotonic(), what="commits after the rebalance")
    finally:
        stop_producing.set()
        producer_thread.join(150)
        try:
            acked_now = set(acked)
            wait_until(lambda: acked_now <= {v for _, _, v in list(consumed)}, 90,
                       "every acknowledged record consumed")
        finally:
            for member in members:
                if member.thread.is_alive():
                    member.close()

    assert not produce_errors, produce_errors[:5]
    assert len(acked) > 100
    values = {v for _, _, v in consumed}
    missing = set(acked) - values
    assert not missing, f"{len(missing)} acknowledged records never consumed: {sorted(missing)[:5]}"
    seen: dict[int, set[int]] = defaultdict(set)
    for partition, offset, _ in consumed:
        seen[partition].add(offset)
    for _, partition, offset in commits:
        # A commit at `offset` says "everything below it is processed": it must be.
        skipped = set(range(offset)) - seen[partition]
        assert not skipped, f"commit {partition}@{offset} covers unconsumed offsets {sorted(skipped)[:5]}"
    # What the group has committed is what it consumed, and never behind an acknowledged
    # commit: the new coordinator kept every one.
    final = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    try:
        found = wait_until(lambda: _try_all_committed(final, topic, partitions), 60,
                           "the final committed offsets")
    finally:
        final.close()
    for partition in range(partitions):
        highest_acked = max((o for _, p, o in commits if p == partition), default=0)
        assert found[partition] >= highest_acked, (partition, found[partition], highest_acked)
        assert found[partition] == max(seen[partition]) + 1, (partition, found[partition])


def _commit_start(consumer: Consumer, topic: str, partitions: int) -> bool:
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, 0) for p in range(partitions)],
                        asynchronous=False)
        return True
    except KafkaException:
        return False  # the coordinator is still being set up: again


def _try_all_committed(consumer: Consumer, topic: str, partitions: int) -> dict[int, int] | None:
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=5)
    except KafkaException:
        return None
    return {tp.partition: tp.offset for tp in found}


def _wait_for_commits(commits: list[tuple[float, int, int]], lock: threading.Lock,
                      since: float, what: str) -> None:
    def enough() -> bool:
        with lock:
            return len({p for t, p, _ in commits if t >= since}) >= 2
    wait_until(enough, 90, what)
