"""The KIP-848 consumer group protocol in cluster mode, against real processes: Debian's
etcd, three logserver brokers and two confluent-kafka consumers with
``group.protocol=consumer``. Topic ids in ConsumerGroupHeartbeat assignments and in
ConsumerGroupDescribe are the cluster's (those Metadata answers), whichever broker
coordinates the group: a member only consumes partitions of topic ids it knows from
Metadata. The group keeps consuming, skipping nothing, when its coordinator (the leader
of the group's ``__consumer_offsets`` partition) is killed with kill -9."""

from __future__ import annotations

import threading
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from helpers.clusterprocs import Cluster
from helpers.kafkaclient import BlockingClient
from helpers.waiting import wait_until

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    FindCoordinatorRequest,
    MetadataRequest,
    OffsetCommitRequest,
)
from logserver.groups.store import kafka_partition_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

OFFSETS = "__consumer_offsets"
TOPIC, GROUP, PARTITIONS = "kip848-cluster", "kip848-cluster-group", 4
SETTINGS = {"group.consumer.heartbeat.interval.ms": 300,
            "group.consumer.session.timeout.ms": 15000}


@pytest.fixture
def cluster(tmp_path, etcd):
    nodes = Cluster(tmp_path, etcd, 3, **{"min.insync.replicas": 2,
                                          "default.replication.factor": 3,
                                          "replica.lag.time.max.ms": 5000, **SETTINGS})
    try:
        yield nodes.start()
    finally:
        nodes.stop()


class Member:
    """A ``group.protocol=consumer`` consumer in its own thread, committing each record
    synchronously before keeping it. A refused commit (STALE_MEMBER_EPOCH while a
    heartbeat brings a new epoch: librdkafka hands it to the application) is retried after
    a poll that lets the consumer catch up; a record that poll returns is kept for next,
    never dropped (its partition's position is already past it: it would not come again)."""

    def __init__(self, name: str, bootstrap: str, consumed: list[tuple[int, int, bytes]],
                 lock: threading.Lock) -> None:
        self.name, self.consumed, self.lock = name, consumed, lock
        self.errors: list[str] = []
        self._assigned: set[int] = set()
        self._held: deque[Message] = deque()  # polled while a commit was retried
        self.stop = threading.Event()
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": GROUP, "client.id": name,
            "group.protocol": "consumer", "auto.offset.reset": "earliest",
            "enable.auto.commit": False})
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def assigned(self) -> set[int]:
        return self._assigned

    def _run(self) -> None:
        self.consumer.subscribe([TOPIC])
        while not self.stop.is_set():
            message = self._held.popleft() if self._held else self.consumer.poll(0.1)
            self._assigned = {tp.partition for tp in self.consumer.assignment()}
            if message is None:
                continue
            if message.error() is not None:
                self.errors.append(str(message.error()))
                continue
            while not self.stop.is_set():
                try:
                    self.consumer.commit(message=message, asynchronous=False)
                    break
                except KafkaException as exc:
                    self.errors.append(str(exc))
                    polled = self.consumer.poll(0.1)  # serves the rebalance events meanwhile
                    if polled is not None:
                        self._held.append(polled)
            with self.lock:
                self.consumed.append((message.partition(), message.offset(), message.value()))
        self.consumer.close()

    def start(self) -> Member:
        self.thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        self.thread.join(60)
        assert not self.thread.is_alive(), f"{self.name} did not stop"


def _produce(bootstrap: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(TOPIC, value=value, partition=i % PARTITIONS)
    assert producer.flush(60) == 0


def _metadata_topic_id(port: int) -> bytes:
    client = BlockingClient(port)
    try:
        response = client.call(ApiKey.METADATA, 12, MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
            allow_auto_topic_creation=False))
    finally:
        client.close()
    [topic] = response.topics
    assert topic.error_code == ErrorCode.NONE, topic
    return bytes(topic.topic_id)


def _described_topic_ids(port: int) -> set[bytes]:
    """Every topic id in the coordinator's ConsumerGroupDescribe of the group (members'
    current and target assignments)."""
    group = _described(port, GROUP)
    ids = set()
    for member in group.members:
        for assignment in (member.assignment, member.target_assignment):
            for tp in assignment.topic_partitions:
                assert tp.topic_name == TOPIC, tp
                ids.add(bytes(tp.topic_id))
    return ids


def _coordinator(cluster: Cluster) -> int:
    partition = cluster.partition(OFFSETS, kafka_partition_for(GROUP, 50))
    return -1 if partition is None else partition.leader


def test_consumer_protocol_group_shares_exactly_once_and_survives_a_coordinator_kill9(cluster):
    admin = cluster.admin()
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(timeout=20)
    wait_until(lambda: all((p := cluster.partition(TOPIC, i)) is not None and len(p.isrs) == 3
                           for i in range(PARTITIONS)), 30, f"{TOPIC} in sync")
    # Metadata answers the cluster's topic id, the same at every broker.
    topic_ids = {_metadata_topic_id(b.port) for b in cluster.brokers.values()}
    assert len(topic_ids) == 1, topic_ids
    [topic_id] = topic_ids

    first = [b"a%05d" % i for i in range(400)]
    _produce(cluster.bootstrap, first)
    lock = threading.Lock()
    consumed: list[tuple[int, int, bytes]] = []
    members = [Member(name, cluster.bootstrap, consumed, lock).start()
               for name in ("member-a", "member-b")]
    try:
        def values() -> Counter[bytes]:
            with lock:
                return Counter(v for _, _, v in consumed)

        def wait(condition: Callable[[], object], timeout: float, what: str) -> None:
            try:
                wait_until(condition, timeout, what)
            except AssertionError as exc:  # what each member has, to tell why
                raise AssertionError(f"{exc}; " + "; ".join(
                    f"{m.name}: assigned {sorted(m.assigned())}, errors {m.errors[-3:]}"
                    for m in members) + f"; {len(values())} records consumed") from None

        wait(lambda: set(first) <= set(values()), 120, "the first records consumed")
        wait(lambda: all(m.assigned() for m in members)
             and {p for m in members for p in m.assigned()} == set(range(PARTITIONS)), 60,
             "both members to share the partitions")
        with lock:
            by_member = sorted(p for m in members for p in m.assigned())
        assert by_member == list(range(PARTITIONS)), by_member  # each partition once
        twice = [v for v, n in values().items() if n > 1]
        assert not twice, f"{len(twice)} records consumed twice: {twice[:5]}"

        coordinator = wait_until(lambda: (c := _coordinator(cluster)) in cluster.brokers and c,
                                 30, "the group's coordinator")
        assert _described_topic_ids(cluster.brokers[coordinator].port) == {topic_id}

        cluster.brokers[coordinator].kill9()
        wait_until(lambda: _coordinator(cluster) not in (-1, coordinator), 60,
                   "a new coordinator")
        second = [b"b%05d" % i for i in range(400)]
        _produce(cluster.bootstrap, second)
        wait(lambda: set(second) <= set(values()), 180,
             "the records produced after the kill consumed")
        new = _coordinator(cluster)
        wait_until(lambda: _described_topic_ids(cluster.brokers[new].port) == {topic_id}, 60,
                   "the new coordinator describing the cluster's topic id")
    finally:
        for member in members:
            member.close()

    # No record skipped: every offset of every partition was consumed.
    seen: dict[int, set[int]] = {p: set() for p in range(PARTITIONS)}
    for partition, offset, _ in consumed:
        seen[partition].add(offset)
    for partition, offsets in seen.items():
        assert offsets == set(range(len(offsets))), (partition, sorted(
            set(range(max(offsets) + 1)) - offsets)[:5])
    assert sum(len(o) for o in seen.values()) == len(first) + len(second)


def test_new_coordinator_restores_the_members_with_their_epochs(cluster):
    """The broker that takes over a group's ``__consumer_offsets`` partition after a
    kill -9 of its coordinator loads the KIP-848 group from that partition, members,
    epochs and assignments included (as Kafka replays it): the member's next heartbeat
    with the epoch it had keeps it (not UNKNOWN_MEMBER_ID, which makes every member
    rejoin at epoch 0, and a commit sent meanwhile fail with STALE_MEMBER_EPOCH), and an
    OffsetCommit with that epoch is accepted there."""
    group, member_id = "kip848-restored", "restored-member"
    admin = cluster.admin()
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(timeout=20)
    wait_until(lambda: all((p := cluster.partition(TOPIC, i)) is not None and len(p.isrs) == 3
                           for i in range(PARTITIONS)), 30, f"{TOPIC} in sync")
    topic_id = _metadata_topic_id(cluster.brokers[1].port)
    old, joined = _coordinator_heartbeat(cluster, group, member_id, 0, [])
    assert (joined.error_code, joined.member_id, joined.member_epoch) == (0, member_id, 1), joined
    everything = [(topic_id, list(range(PARTITIONS)))]
    assert [(bytes(tp.topic_id), sorted(tp.partitions))
            for tp in joined.assignment.topic_partitions] == everything
    assert _commit(cluster.brokers[old].port, group, member_id, 1) == ErrorCode.NONE

    cluster.brokers[old].kill9()
    new, again = _coordinator_heartbeat(cluster, group, member_id, 1, everything)
    assert new != old
    assert (again.error_code, again.member_epoch) == (ErrorCode.NONE, 1), again
    assert _commit(cluster.brokers[new].port, group, member_id, 1) == ErrorCode.NONE
    described = _described(cluster.brokers[new].port, group)
    assert described.group_epoch == 1, described
    assert [(m.member_id, m.member_epoch) for m in described.members] == [(member_id, 1)]


#: the answers of a broker that is not (or not yet) the group's coordinator
_MOVING = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
           ErrorCode.COORDINATOR_NOT_AVAILABLE}


def _coordinator_heartbeat(cluster: Cluster, group: str, member_id: str, epoch: int,
                           owned: list[tuple[bytes, list[int]]]) -> tuple[int, Any]:
    """(node, answer): a heartbeat sent, as a member does, to the coordinator that
    FindCoordinator names, again while that broker is not (yet) serving the group."""

    def attempt() -> tuple[int, Any] | None:
        port = next(b.port for b in cluster.brokers.values() if b.running)
        client = BlockingClient(port)
        try:
            found = client.call(ApiKey.FIND_COORDINATOR, 3,
                                FindCoordinatorRequest(key=group, key_type=0))
        finally:
            client.close()
        broker = cluster.brokers.get(found.node_id)
        if found.error_code != ErrorCode.NONE or broker is None or not broker.running:
            return None
        answer = _heartbeat(broker.port, group, member_id, epoch, owned)
        return None if answer.error_code in _MOVING else (found.node_id, answer)

    return wait_until(attempt, 60, f"a heartbeat served by {group}'s coordinator")


def _heartbeat(port: int, group: str, member_id: str, epoch: int,
               owned: list[tuple[bytes, list[int]]]) -> Any:
    """A full ConsumerGroupHeartbeat v1, as a member sends one to a coordinator it has
    just found."""
    tps = ConsumerGroupHeartbeatRequest.TopicPartitions
    client = BlockingClient(port)
    try:
        return client.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=member_id, member_epoch=epoch,
            rebalance_timeout_ms=30_000, subscribed_topic_names=[TOPIC],
            topic_partitions=[tps(topic_id=i, partitions=p) for i, p in owned]))
    finally:
        client.close()


def _commit(port: int, group: str, member_id: str, epoch: int) -> int:
    """OffsetCommit v9 of offset 1 of partition 0 with ``epoch``: its error code."""
    client = BlockingClient(port)
    try:
        response = client.call(ApiKey.OFFSET_COMMIT, 9, OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=epoch, member_id=member_id,
            group_instance_id=None, topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                name=TOPIC, partitions=[OffsetCommitRequest.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                    committed_metadata="")])]))
    finally:
        client.close()
    [[partition]] = [t.partitions for t in response.topics]
    return int(partition.error_code)


def _described(port: int, group: str) -> Any:
    client = BlockingClient(port)
    try:
        response = client.call(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, ConsumerGroupDescribeRequest(
            group_ids=[group], include_authorized_operations=False))
    finally:
        client.close()
    [described] = response.groups
    assert described.error_code == ErrorCode.NONE, described
    return described


def test_coordinator_without_a_replica_of_the_topic_assigns_and_commits_it(cluster):
    """A topic with one replica, on a broker that is not the group's coordinator: the
    coordinator knows the topic from the cluster, so a KIP-848 member gets its
    partitions and commits (OffsetCommit v9) and a classic commit are accepted."""
    topic, partitions = "kip848-one-replica", 2
    admin = cluster.admin()  # kept: a collected admin client fails its futures
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=20)
    led = wait_until(lambda: all((p := cluster.partition(topic, i)) is not None
                                 and p.leader in cluster.brokers for i in range(partitions))
                     and [cluster.partition(topic, i) for i in range(partitions)], 30,
                     f"{topic} led")
    replicas = {r for p in led for r in p.replicas}
    assert len(replicas) < len(cluster.brokers), replicas
    # The first FindCoordinator creates __consumer_offsets; then pick a group whose
    # coordinator holds no replica of the topic.
    starter = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "starter"})
    try:
        wait_until(lambda: _try(lambda: starter.committed(
            [TopicPartition(topic, 0)], timeout=5)), 60, "a group coordinator")
    finally:
        starter.close()
    group, classic_group = wait_until(
        lambda: [g for g in (f"elsewhere-{i}" for i in range(200))
                 if _leader(cluster, g) not in {-1, *replicas}][:2], 60,
        "groups coordinated away from the topic's replicas")
    classic = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": classic_group})
    try:  # a classic commit (OffsetCommit v9 without a member), checked by the coordinator
        [done] = classic.commit(offsets=[TopicPartition(topic, 1, 7)], asynchronous=False)
        assert done.error is None, done
    finally:
        classic.close()
    values = [b"c%04d" % i for i in range(100)]
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": 1})
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % partitions)
    assert producer.flush(30) == 0

    member = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                       "group.protocol": "consumer", "auto.offset.reset": "earliest",
                       "enable.auto.commit": False})
    got: list[bytes] = []
    try:
        member.subscribe([topic])

        def consumed_all() -> bool:
            message = member.poll(0.2)
            if message is not None and message.error() is None:
                member.commit(message=message, asynchronous=False)
                got.append(message.value())
            return set(got) >= set(values)

        wait_until(consumed_all, 90, f"{topic} consumed (assigned: {member.assignment()})")
        committed = member.committed([TopicPartition(topic, p) for p in range(partitions)],
                                     timeout=10)
    finally:
        member.close()
    assert sorted(got) == sorted(values)
    assert [tp.offset for tp in committed] == [50, 50], committed


def _leader(cluster: Cluster, group: str) -> int:
    partition = cluster.partition(OFFSETS, kafka_partition_for(group, 50))
    return -1 if partition is None else partition.leader


def _try(call: Callable[[], object]) -> bool:
    try:
        call()
        return True
    except KafkaException:
        return False
