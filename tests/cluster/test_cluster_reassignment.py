"""Partition reassignment (AlterPartitionReassignments / ListPartitionReassignments) on
real processes: etcd, logserver brokers, confluent-kafka and kafka-python producers, and
the raw wire through our own client core (neither Python client has the admin call).
The pure state steps (logserver/cluster/reassignment.py) are checked first, without I/O.
"""

from __future__ import annotations

import time

import pytest
from helpers.admin_cli import logserver, ok, ok_json, one_error_line
from helpers.cluster_clients import (
    ContinuousProducer,
    consume_all,
    consume_partitions,
    create,
    log_bytes,
    produce_partitions,
    wait_for_progress,
)
from helpers.clusterprocs import Cluster, EtcdProcess
from helpers.kafkaclient import BlockingClient, list_offsets_request, produce_request
from helpers.waiting import wait_until
from kafka import KafkaProducer

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    FindCoordinatorRequest,
    ListOffsetsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from logserver.cluster import reassignment
from logserver.cluster.model import ClusterModel, Keys, PartitionState, TopicRecord

Topic = AlterPartitionReassignmentsRequest.ReassignableTopic
Partition = AlterPartitionReassignmentsRequest.ReassignablePartition
ListOffsetsPartitionResponse = ListOffsetsResponse.ListOffsetsPartitionResponse


# -- the state steps, sans I/O ----------------------------------------------------------------

def test_a_move_adds_the_target_then_settles_on_it_with_a_new_leader_epoch() -> None:
    start = PartitionState((1, 2), 1, 4, (1, 2), 7)
    moving = reassignment.begin(start, (3, 4))
    assert (moving.replicas, moving.adding, moving.removing) == ((3, 4, 1, 2), (3, 4), (1, 2))
    assert (moving.leader, moving.leader_epoch, moving.isr) == (1, 4, (1, 2))
    assert PartitionState.decode(moving.encode()) == moving
    assert reassignment.complete(moving, {1, 2, 3, 4}) is None  # targets not in sync yet
    half = PartitionState(moving.replicas, 1, 4, (3, 1, 2), 9, moving.adding, moving.removing)
    assert reassignment.complete(half, {1, 2, 3, 4}) is None
    synced = PartitionState(moving.replicas, 1, 4, (3, 4, 1, 2), 10, moving.adding, moving.removing)
    done = reassignment.complete(synced, {1, 2, 3, 4})
    assert done == PartitionState((3, 4), 3, 5, (3, 4), 11)
    # A leader that stays in the target keeps its epoch.
    kept = PartitionState((2, 3, 1), 2, 4, (2, 3, 1), 3, (3,), (1,))
    assert reassignment.complete(kept, {1, 2, 3}) == PartitionState((2, 3), 2, 4, (2, 3), 4)


def test_cancel_puts_the_original_replicas_back_and_old_states_decode() -> None:
    moving = reassignment.begin(PartitionState((1, 2), 2, 1, (1, 2), 0), (1, 3))
    assert (moving.replicas, moving.adding, moving.removing) == ((1, 3, 2), (3,), (2,))
    assert reassignment.cancel(moving) == PartitionState((1, 2), 2, 1, (1, 2), 2)
    # A new target replaces the move under way, measured from the original replicas.
    again = reassignment.begin(moving, (2, 4))
    assert (again.replicas, again.adding, again.removing) == ((2, 4, 1), (4,), (1,))
    with pytest.raises(ValueError):
        reassignment.cancel(PartitionState((3, 1), 3, 2, (3,), 5, (3,), ()))
    old = b'{"replicas": [1, 2], "leader": 1, "leader_epoch": 0, "isr": [1, 2], "partition_epoch": 0}'
    assert PartitionState.decode(old) == PartitionState((1, 2), 1, 0, (1, 2), 0)
    assert b"adding" not in PartitionState.decode(old).encode()


def test_local_copies_no_longer_assigned_are_found() -> None:
    keys = Keys("/t")
    model = ClusterModel(keys)
    model.apply(keys.topic("a"), TopicRecord("a", b"\0" * 16, 2).encode(), 1)
    model.apply(keys.topic("b"), TopicRecord("b", b"\1" * 16, 1).encode(), 1)
    model.apply(keys.partition("a", 0), PartitionState((1, 2), 1, 0, (1, 2)).encode(), 2)
    model.apply(keys.partition("a", 1), PartitionState((2, 3), 2, 0, (2, 3)).encode(), 2)
    assert reassignment.unassigned(model, 1, {"a": 2, "b": 1, "c": 1}) == ([], [("a", 1)])
    model.apply(keys.partition("b", 0), PartitionState((3,), 3, 0, (3,)).encode(), 3)
    assert reassignment.unassigned(model, 1, {"a": 2, "b": 1}) == (["b"], [("a", 1)])
    assert reassignment.unassigned(model, 3, {"a": 2, "b": 1}) == ([], [("a", 0)])


# -- real brokers -------------------------------------------------------------------------------

class OrderedRetriesProducer(ContinuousProducer):
    """kafka-python with one request in flight per connection. With several, two batches
    of a partition refused with NOT_LEADER_OR_FOLLOWER by a leader that hands over come
    back to its accumulator in reverse order (``appendleft``, where Kafka's Java client
    inserts by sequence), so the new leader sees the later sequence first and answers
    OUT_OF_ORDER_SEQUENCE_NUMBER (as Kafka's broker does), which kafka-python does not
    retry. One in flight keeps the retried batch first."""

    def _run(self) -> None:
        if self.kind != "kafka-python":
            super()._run()
            return
        kp = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", enable_idempotence=True,
                           linger_ms=5, retries=2**31 - 1, delivery_timeout_ms=120000,
                           request_timeout_ms=10000, max_in_flight_requests_per_connection=1)
        i = 0
        while not self.stop.is_set():
            value = f"{i:07d}".encode()
            future = kp.send(self.topic, value=value, partition=0)
            future.add_callback(lambda _, v=value: self.acked.append(v))
            future.add_errback(lambda exc: self.failed.append(repr(exc)))
            time.sleep(0.005)
            i += 1
        kp.flush(120)
        kp.close(10)


@pytest.fixture
def four(tmp_path):
    """Four brokers configured, none started: each test starts the ones it needs."""
    etcd = EtcdProcess(tmp_path / "etcd-data")
    etcd.start()
    nodes = Cluster(tmp_path, etcd, 4, **{"min.insync.replicas": 2,
                                         "default.replication.factor": 2,
                                         "replica.lag.time.max.ms": 5000})
    try:
        yield nodes
    finally:
        nodes.stop()
        etcd.stop()


def _start(cluster: Cluster, *nodes: int) -> None:
    for n in nodes:
        cluster.brokers[n].start()
    cluster.wait_for_brokers({n for n, b in cluster.brokers.items() if b.running})


def _alter(cluster: Cluster, via: int, moves: dict[tuple[str, int], list[int] | None]
           ) -> dict[tuple[str, int], int]:
    by_topic: dict[str, list[Partition]] = {}
    for (topic, index), replicas in moves.items():
        by_topic.setdefault(topic, []).append(Partition(partition_index=index, replicas=replicas))
    client = BlockingClient(cluster.brokers[via].port)
    try:
        response: AlterPartitionReassignmentsResponse = client.call(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, AlterPartitionReassignmentsRequest(
                timeout_ms=30000, topics=[Topic(name=t, partitions=ps) for t, ps in by_topic.items()]))
    finally:
        client.close()
    assert response.error_code == ErrorCode.NONE
    return {(t.name, p.partition_index): p.error_code for t in response.responses for p in t.partitions}


def _latest_at_leader(cluster: Cluster, topic: str) -> ListOffsetsPartitionResponse:
    """ListOffsets "latest" of partition 0, asked of the leader etcd names now."""
    client = BlockingClient(cluster.brokers[cluster.partition(topic, 0).leader].port)
    try:
        listed: ListOffsetsResponse = client.call(ApiKey.LIST_OFFSETS, 4, list_offsets_request(topic, 0))
    finally:
        client.close()
    return listed.topics[0].partitions[0]


def _ongoing(cluster: Cluster, via: int) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
    client = BlockingClient(cluster.brokers[via].port)
    try:
        response: ListPartitionReassignmentsResponse = client.call(
            ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, ListPartitionReassignmentsRequest(timeout_ms=30000))
    finally:
        client.close()
    assert response.error_code == ErrorCode.NONE
    return {(t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
            for t in response.topics for p in t.partitions}


@pytest.mark.slow
def test_a_new_broker_takes_over_replicas_under_acks_all_producers(four) -> None:
    cluster = four
    _start(cluster, 1, 2)
    topics = {"confluent-kafka": "move-ck", "kafka-python": "move-kp"}
    for topic in topics.values():
        create(cluster, topic, partitions=1, rf=2)
        assert sorted(cluster.partition(topic, 0).replicas) == [1, 2]
    _start(cluster, 3)
    producers = [OrderedRetriesProducer(kind, cluster.bootstrap, topic) for kind, topic in topics.items()]
    with producers[0], producers[1]:
        wait_for_progress(producers)
        _start(cluster, 4)  # adding a broker: a new node.id, then a reassignment
        assert _alter(cluster, 2, {("move-ck", 0): [3, 4], ("move-kp", 0): [4, 3]}) == {
            ("move-ck", 0): ErrorCode.NONE, ("move-kp", 0): ErrorCode.NONE}
        for topic, target in (("move-ck", [3, 4]), ("move-kp", [4, 3])):
            wait_until(lambda t=topic, r=target: (p := cluster.partition(t, 0)) is not None
                       and p.replicas == r and sorted(p.isrs) == [3, 4] and p.leader in (3, 4),
                       90, f"{topic} moved to brokers {target}, both in sync")
        assert _ongoing(cluster, 3) == {}
        for topic in topics.values():  # a new leader epoch; the old replicas are out
            # KIP-207, as Kafka: until the follower has fetched up to where the new leader's
            # epoch began, its high watermark lags and "latest" is OFFSET_NOT_AVAILABLE,
            # which clients retry. The answer that follows is at the new epoch.
            latest = wait_until(lambda t=topic: (a := _latest_at_leader(cluster, t)).error_code
                                != ErrorCode.OFFSET_NOT_AVAILABLE and a, 30,
                                f"the new leader of {topic} to answer ListOffsets latest")
            assert (latest.error_code, latest.leader_epoch >= 1) == (ErrorCode.NONE, True), latest
            for old in (1, 2):
                client = BlockingClient(cluster.brokers[old].port)
                try:
                    refused = client.call(ApiKey.PRODUCE, 7, produce_request(topic, 0, [b"stale"]))
                finally:
                    client.close()
                assert refused.responses[0].partition_responses[0].error_code == \
                    ErrorCode.NOT_LEADER_OR_FOLLOWER
        wait_for_progress(producers)  # the new leaders take acks=all writes
    for producer in producers:
        assert not producer.failed, (producer.kind, producer.failed[:5])
        records = consume_all(cluster.bootstrap, producer.topic, len(producer.acked), timeout=60)
        values = [value for _, value in records]
        assert [offset for offset, _ in records] == list(range(len(records)))  # dense
        assert len(set(values)) == len(values), f"{producer.kind}: duplicates"
        assert set(producer.acked) <= set(values), f"{producer.kind}: acknowledged records lost"
        assert values == sorted(values), f"{producer.kind}: order"
    new = (cluster.brokers[3], cluster.brokers[4])
    for topic in topics.values():
        wait_until(lambda t=topic: len({log_bytes(b, t) for b in new}) == 1, 30,
                   f"identical replicas of {topic} on brokers 3 and 4")
        for old in (1, 2):
            wait_until(lambda t=topic, n=old: not cluster.brokers[n].partition_dir(t, 0).exists(),
                       30, f"broker {old} to delete its copy of {topic}")


@pytest.mark.slow
def test_a_move_under_way_is_listed_and_cancelled(four) -> None:
    cluster = four
    _start(cluster, 1, 2, 3)
    create(cluster, "undo", partitions=1, rf=2)
    original = cluster.partition("undo", 0).replicas
    spare = ({1, 2, 3} - set(original)).pop()
    assert _alter(cluster, 1, {("undo", 0): [original[0], 9]}) == {("undo", 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    assert _alter(cluster, 1, {("undo", 0): []}) == {("undo", 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    assert _alter(cluster, 1, {("nope", 0): [1]}) == {("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert _alter(cluster, 1, {("undo", 0): None}) == {("undo", 0): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}
    create_offsets = BlockingClient(cluster.brokers[1].port)
    try:
        create_offsets.call(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key="g", key_type=0))
    finally:
        create_offsets.close()
    wait_until(lambda: cluster.partition("__consumer_offsets", 0) is not None, 20,
               "__consumer_offsets to exist")
    assert _alter(cluster, 1, {("__consumer_offsets", 0): [1]}) == {
        ("__consumer_offsets", 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    cluster.pause(spare)  # the new replica cannot catch up: the move stays under way
    try:
        assert _alter(cluster, original[0], {("undo", 0): [original[0], spare]}) == {
            ("undo", 0): ErrorCode.NONE}
        assert _ongoing(cluster, original[0]) == {
            ("undo", 0): ([original[0], spare, original[1]], [spare], [original[1]])}
        b = cluster.bootstrap  # the command line shows and cancels it too
        listed = ok_json("topic", "reassignments", "-b", b)
        # each move's progress in bytes (DescribeLogDirs): nothing reached the paused spare
        assert [(r.pop("moved_bytes"), r.pop("total_bytes") >= 0) for r in listed] == [(0, True)]
        assert listed == [{
            "topic": "undo", "partition": 0, "replicas": [original[0], spare, original[1]],
            "adding": [spare], "removing": [original[1]]}]
        assert "CANCELLED" in ok("topic", "reassign", "--cancel", "undo:0", "-b", b)
        again = logserver("topic", "reassign", "--cancel", "undo:0", "-b", b)
        assert again.returncode == 1 and "NO_REASSIGNMENT_IN_PROGRESS" in one_error_line(again)
        wait_until(lambda: _ongoing(cluster, original[0]) == {}, 10, "the move to be gone")
        part = cluster.partition("undo", 0)
        assert (part.replicas, sorted(part.isrs)) == (original, sorted(original))
    finally:
        cluster.resume(spare)
    # The spare broker may have created a copy while it was a target: it deletes it.
    wait_until(lambda: not cluster.brokers[spare].partition_dir("undo", 0).exists(), 30,
               f"broker {spare} to hold no copy of undo")


@pytest.mark.slow
def test_one_partition_moves_away_and_the_others_stay(four) -> None:
    cluster = four
    _start(cluster, 1, 2)
    create(cluster, "split", partitions=2, rf=2)
    produce_partitions(cluster.bootstrap, "split", [(i % 2, f"r{i:03d}".encode()) for i in range(200)])
    _start(cluster, 3)
    assert _alter(cluster, 1, {("split", 0): [2, 3]}) == {("split", 0): ErrorCode.NONE}
    wait_until(lambda: (p := cluster.partition("split", 0)) is not None and p.replicas == [2, 3]
               and sorted(p.isrs) == [2, 3], 60, "split-0 moved to brokers 2 and 3")
    two, three, one = cluster.brokers[2], cluster.brokers[3], cluster.brokers[1]
    wait_until(lambda: log_bytes(two, "split") == log_bytes(three, "split") != b"", 30,
               "identical copies of split-0 on brokers 2 and 3")
    # Broker 1 still holds split-1 (untouched) and has emptied its copy of split-0.
    wait_until(lambda: log_bytes(one, "split") == b"", 30, "broker 1 to empty split-0")
    assert sum(f.stat().st_size for f in one.segment_files("split", 1)) > 0
    records = consume_partitions(cluster.bootstrap, "split", 2, 200)
    assert sorted(records) == [f"r{i:03d}".encode() for i in range(200)]
    # And back: broker 1 refills its emptied copy from the leader.
    assert _alter(cluster, 3, {("split", 0): [1, 2]}) == {("split", 0): ErrorCode.NONE}
    wait_until(lambda: (p := cluster.partition("split", 0)) is not None and p.replicas == [1, 2]
               and sorted(p.isrs) == [1, 2], 60, "split-0 back on brokers 1 and 2")
    wait_until(lambda: log_bytes(one, "split") == log_bytes(two, "split"), 30,
               "broker 1's copy of split-0 identical to broker 2's again")
    wait_until(lambda: not three.partition_dir("split", 0).exists(), 30,
               "broker 3, with no partition of split left, to delete its copy")
    produce_partitions(cluster.bootstrap, "split", [(0, b"after")])
    assert len(consume_partitions(cluster.bootstrap, "split", 2, 201)) == 201


@pytest.mark.slow
def test_the_leader_dies_during_a_move_and_deletes_its_copy_when_back(four) -> None:
    cluster = four
    _start(cluster, 1, 2, 3)
    create(cluster, "crash", partitions=1, rf=2)
    _start(cluster, 4)
    before = cluster.partition("crash", 0)
    target = sorted({1, 2, 3, 4} - set(before.replicas))
    producer = ContinuousProducer("confluent-kafka", cluster.bootstrap, "crash")
    with producer:
        wait_for_progress([producer])
        cluster.pause(target[1])  # so that the move cannot finish before the kill
        try:
            assert _alter(cluster, target[0], {("crash", 0): target}) == {("crash", 0): ErrorCode.NONE}
            cluster.brokers[before.leader].kill9()  # mid-move: the other original replica leads
            wait_until(lambda: cluster.partition("crash", 0).replicas == [*target, *before.replicas],
                       10, "the move under way in Metadata")
        finally:
            cluster.resume(target[1])
        wait_until(lambda: (p := cluster.partition("crash", 0)) is not None and p.replicas == target
                   and sorted(p.isrs) == target, 90, f"crash-0 moved to {target} without its leader")
        wait_for_progress([producer])
        cluster.brokers[before.leader].start()  # back: its copy is no replica any more
        cluster.wait_for_brokers({1, 2, 3, 4})
    assert not producer.failed, producer.failed[:5]
    records = consume_all(cluster.bootstrap, "crash", len(producer.acked), timeout=60)
    values = [value for _, value in records]
    assert [offset for offset, _ in records] == list(range(len(records)))
    assert len(set(values)) == len(values) and values == sorted(values)
    assert set(producer.acked) <= set(values), "acknowledged records lost"
    for old in before.replicas:
        wait_until(lambda n=old: not cluster.brokers[n].partition_dir("crash", 0).exists(), 30,
                   f"broker {old} to delete its copy of crash-0")
    new = [cluster.brokers[n] for n in target]
    wait_until(lambda: len({log_bytes(b, "crash") for b in new}) == 1, 30, "identical copies")
