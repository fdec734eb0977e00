"""CreateTopics with manual replica assignments on a 3-node cluster, as Kafka takes them:
the replicas given per partition (first = preferred leader) show in Metadata and carry
acks=all writes; bad assignments get Kafka's errors. Real etcd and brokers,
confluent-kafka's AdminClient, producer and consumer, and our own client for the
requests librdkafka refuses to send."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import NewTopic
from helpers.cluster_clients import consume_partitions, produce_partitions
from helpers.clusterprocs import running_cluster
from helpers.javaclient import run_java
from helpers.kafkaclient import BlockingClient
from helpers.waiting import wait_until

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import CreateTopicsRequest

pytestmark = pytest.mark.slow

Assignment = CreateTopicsRequest.CreatableReplicaAssignment


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("ctopics")
    with running_cluster(root, 3, **{"min.insync.replicas": 2, "default.replication.factor": 3}) as nodes:
        yield nodes


def test_manual_assignment_places_replicas_and_leaders(cluster) -> None:
    wanted = {0: [2, 3], 1: [3, 1], 2: [1, 2]}
    admin = cluster.admin()
    admin.create_topics([NewTopic("placed", 3, replica_assignment=[wanted[i] for i in range(3)])])[
        "placed"].result(timeout=30)

    def placed() -> bool:
        parts = [cluster.partition("placed", i) for i in range(3)]
        return all(p is not None and list(p.replicas) == wanted[i] and p.leader == wanted[i][0]
                   and sorted(p.isrs) == sorted(wanted[i]) for i, p in enumerate(parts))

    wait_until(placed, 30, f"replicas {wanted}, each led by its first replica, all in sync")
    produce_partitions(cluster.bootstrap, "placed", [(i, f"v{i}".encode()) for i in range(3)] * 2)
    assert sorted(consume_partitions(cluster.bootstrap, "placed", 3, 6)) == sorted(
        [f"v{i}".encode() for i in range(3)] * 2)
    # Each replica holds its partitions' data, no other broker a record of them.
    for node in cluster.brokers:
        for i, replicas in wanted.items():
            def size(n: int = node, p: int = i) -> int:
                where = cluster.brokers[n].partition_dir("placed", p)
                return sum(f.stat().st_size for f in where.glob("*.log")) if where.is_dir() else 0
            if node in replicas:
                wait_until(size, 30, f"placed-{i} data on broker {node}")
            else:
                assert size() == 0, f"placed-{i} has data on broker {node}"


@pytest.mark.parametrize(("assignment", "message"), [
    ([[1, 9]], "broker 9"),
    ([[1, 1]], "more than once"),
    ([[1, 2], [3]], "replicas"),
])
def test_bad_assignments_are_refused(cluster, assignment, message) -> None:
    admin = cluster.admin()
    with pytest.raises(KafkaException, match="INVALID_REPLICA_ASSIGNMENT") as caught:
        admin.create_topics([NewTopic("bad", len(assignment), replica_assignment=assignment)])["bad"].result(timeout=30)
    assert message in str(caught.value)
    assert cluster.partition("bad", 0) is None


def _create_raw(cluster, topic: CreateTopicsRequest.CreatableTopic) -> tuple[int, str | None]:
    client = BlockingClient(cluster.brokers[1].port)
    try:
        response = client.call(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(
            topics=[topic], timeout_ms=10000, validate_only=False))
    finally:
        client.close()
    result = response.topics[0]
    return int(result.error_code), result.error_message


def test_gaps_repeats_and_counts_with_an_assignment_are_refused(cluster) -> None:
    def topic(assignments: list[tuple[int, list[int]]], partitions: int = -1,
              rf: int = -1) -> CreateTopicsRequest.CreatableTopic:
        return CreateTopicsRequest.CreatableTopic(
            name="raw", num_partitions=partitions, replication_factor=rf, configs=[],
            assignments=[Assignment(partition_index=i, broker_ids=b) for i, b in assignments])

    assert _create_raw(cluster, topic([(0, [1]), (2, [2])]))[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert _create_raw(cluster, topic([(0, [1]), (0, [2])]))[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert _create_raw(cluster, topic([(1, [1])]))[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert _create_raw(cluster, topic([(0, [])]))[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert _create_raw(cluster, topic([(0, [1])], partitions=1))[0] == ErrorCode.INVALID_REQUEST
    assert _create_raw(cluster, topic([(0, [1])], rf=1))[0] == ErrorCode.INVALID_REQUEST
    assert cluster.partition("raw", 0) is None
    # Given in any order, the indexes count: partition 1 is on broker 3 alone.
    assert _create_raw(cluster, topic([(1, [3]), (0, [2])])) == (ErrorCode.NONE, None)
    wait_until(lambda: (p := cluster.partition("raw", 1)) is not None and p.leader == 3
               and list(p.replicas) == [3] and cluster.partition("raw", 0).leader == 2, 30,
               "raw-0 on broker 2 and raw-1 on broker 3")


# -- the answer to a successful CreateTopics (v5+): configs, partitions, replication -------

CONFIGS = [CreateTopicsRequest.CreatableTopicConfig(name="cleanup.policy", value="compact"),
           CreateTopicsRequest.CreatableTopicConfig(name="retention.ms", value="123456")]


def _create_answer(port: int, name: str, *, validate_only: bool = False) -> Any:
    client = BlockingClient(port)
    try:
        response = client.call(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(
            topics=[CreateTopicsRequest.CreatableTopic(
                name=name, num_partitions=2, replication_factor=1, configs=CONFIGS)],
            timeout_ms=10000, validate_only=validate_only))
    finally:
        client.close()
    return response.topics[0]


def _config_rows(result: Any) -> list[tuple]:
    assert result.configs is not None, "a successful CreateTopics answered configs = null"
    return sorted((c.name, c.value, c.read_only, c.config_source, c.is_sensitive)
                  for c in result.configs)


@pytest.mark.parametrize("validate_only", [False, True], ids=["created", "validate-only"])
def test_created_topic_answer_carries_configs_as_single_node_does(cluster, server_factory,
                                                                   validate_only) -> None:
    """Java's AdminClient reads the configs of every successful result (a null list is a
    NullPointerException although the topic was created): the cluster answers as a single
    node with the same settings does, from the same code."""
    name = f"answered-{validate_only}".lower()
    on_cluster = _create_answer(cluster.brokers[1].port, name, validate_only=validate_only)
    assert (on_cluster.error_code, on_cluster.num_partitions, on_cluster.replication_factor) == (
        ErrorCode.NONE, 2, 1)
    rows = _config_rows(on_cluster)
    values = {row[0]: row[1] for row in rows}
    assert values["cleanup.policy"] == "compact" and values["retention.ms"] == "123456"
    assert values["min.insync.replicas"] == "2"  # the brokers' setting, inherited
    if not validate_only:
        assert on_cluster.topic_id != bytes(16)
    single = server_factory(settings={"min.insync.replicas": 2, "default.replication.factor": 3})
    alone = _create_answer(single.port, name, validate_only=validate_only)
    assert alone.error_code == ErrorCode.NONE
    assert rows == _config_rows(alone)


def test_java_admin_create_topics_on_a_cluster(cluster, tmp_path) -> None:
    """kafka-clients' AdminClient.createTopics on a 3-broker cluster: no exception, and
    the partitions, replication factor and configs (with their sources) the answer
    carried."""
    done = run_java("CreateTopicsCheck", tmp_path / "classes", cluster.bootstrap,
                    "java-created", "3", "3")
    assert done.returncode == 0, f"Java AdminClient failed:\n{done.stdout}\n{done.stderr[-4000:]}"
    lines = done.stdout.splitlines()
    assert "partitions 3" in lines and "replication 3" in lines, done.stdout
    assert "config cleanup.policy=compact DYNAMIC_TOPIC_CONFIG" in lines, done.stdout
    assert "config min.insync.replicas=2 STATIC_BROKER_CONFIG" in lines, done.stdout
    wait_until(lambda: cluster.partition("java-created", 2) is not None, 30,
               "java-created in Metadata")
