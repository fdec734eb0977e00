"""The single-node data path in cluster mode: 3 real brokers on one real etcd,
replication factor 3, min.insync.replicas 2, and real clients (confluent-kafka).

Produce, Fetch and ListOffsets are the same handlers in both modes, so transactions
(commit, abort, read_committed) and DeleteRecords work on the cluster as on one node; a
follower whose log ends below the leader's log start (records deleted while it was
down) restarts its log there and catches up instead of asking for offsets forever.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from helpers.cluster_txn import read_to_ends
from helpers.clusterprocs import Cluster
from helpers.kafkaclient import BlockingClient
from helpers.waiting import wait_until

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.batch import iter_batches
from kafkaproto.messages import FetchRequest, ListOffsetsRequest
from logserver.log.manager import LOG_START_OFFSET_FILE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

EARLIEST = -2


def create(cluster: Cluster, topic: str, partitions: int, rf: int = 3) -> None:
    admin = cluster.admin()
    admin.create_topics([NewTopic(topic, partitions, rf)])[topic].result(timeout=20)
    wait_until(lambda: all((p := cluster.partition(topic, i)) is not None and len(p.isrs) == rf
                           for i in range(partitions)), 30, f"{topic} to have its replicas in sync")


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    """acks=all, idempotent; every record acknowledged or the test fails."""
    failures: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5})
    for value in values:
        producer.produce(topic, value=value, partition=0,
                         on_delivery=lambda err, _msg: err is not None and failures.append(err))
    assert producer.flush(30) == 0
    assert failures == []


def isr(cluster: Cluster, topic: str) -> set[int]:
    part = cluster.partition(topic, 0)
    return set(part.isrs) if part is not None else set()


def fetch_request(topic: str, offset: int) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                        isolation_level=0, session_id=0, session_epoch=-1, topics=[
                            FetchRequest.FetchTopic(topic=topic, partitions=[
                                FetchRequest.FetchPartition(
                                    partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                    last_fetched_epoch=-1, log_start_offset=-1,
                                    partition_max_bytes=1 << 20)])],
                        forgotten_topics_data=[], rack_id="")


def test_follower_below_the_leaders_log_start_restarts_there_and_catches_up(cluster):
    topic = "behind"
    create(cluster, topic, partitions=1)
    produce(cluster.bootstrap, topic, [b"old-%d" % i for i in range(10)])
    leader = cluster.partition(topic, 0).leader
    follower = next(n for n in sorted(cluster.brokers) if n != leader)
    third = next(n for n in sorted(cluster.brokers) if n not in (leader, follower))

    cluster.brokers[follower].stop()
    wait_until(lambda: isr(cluster, topic) == {leader, third}, 30, "the ISR without the stopped follower")
    produce(cluster.bootstrap, topic, [b"gone-%d" % i for i in range(20)])
    admin = cluster.admin()
    deleted = admin.delete_records([TopicPartition(topic, 0, 30)])
    assert next(iter(deleted.values())).result(timeout=20).low_watermark == 30
    produce(cluster.bootstrap, topic, [b"new-%d" % i for i in range(5)])  # offsets 30..34
    # The follower that stayed up moves its log start with the leader's (persisted in
    # Kafka's log-start-offset-checkpoint), so no later leader serves deleted records.
    checkpoint = cluster.brokers[third].data_dir / LOG_START_OFFSET_FILE
    wait_until(lambda: checkpoint.exists() and f"{topic} 0 30" in checkpoint.read_text(), 30,
               f"node {third} to move its log start to 30")

    # Back: its log ends at 10, the leader's starts at 30. It must restart its log at 30
    # and fetch from there (else it asks for offset 10 forever and never rejoins the ISR).
    cluster.brokers[follower].start()
    cluster.wait_for_brokers({1, 2, 3})
    wait_until(lambda: isr(cluster, topic) == {1, 2, 3}, 60, "the follower back in the ISR")
    bases = [int(path.stem) for path in cluster.brokers[follower].segment_files(topic, 0)]
    assert min(bases) == 30, bases  # offsets below the leader's log start are gone here too
    assert cluster.brokers[follower].output_tail(20000).count("is below the leader's log start") == 1

    # Leave it the only live replica: it leads, and serves exactly offsets 30..34.
    cluster.brokers[leader].stop()
    cluster.brokers[third].stop()
    wait_until(lambda: (p := cluster.partition(topic, 0)) is not None and p.leader == follower,
               60, f"node {follower} to lead {topic}-0")
    client = BlockingClient(cluster.brokers[follower].port)
    try:
        listed = client.call(ApiKey.LIST_OFFSETS, 5, ListOffsetsRequest(
            replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
                name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=0, current_leader_epoch=-1, timestamp=EARLIEST)])]))
        assert listed.topics[0].partitions[0].offset == 30
        data = client.call(ApiKey.FETCH, 12, fetch_request(topic, 30)).responses[0].partitions[0]
        assert data.error_code == ErrorCode.NONE
        assert (data.log_start_offset, data.high_watermark) == (30, 35)
        offsets = [o for _, h in iter_batches(bytes(data.records))
                   for o in range(h.base_offset, h.base_offset + h.last_offset_delta + 1)]
        assert offsets == list(range(30, 35))
        below = client.call(ApiKey.FETCH, 12, fetch_request(topic, 10)).responses[0].partitions[0]
        assert below.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    finally:
        client.close()


def _read_all(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[bytes]:
    """Every record a consumer with this isolation level gets, up to each partition's end."""
    return read_to_ends({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}",
                         "isolation.level": isolation}, topic, range(partitions))


def test_transactions_commit_and_abort_across_partition_leaders(cluster):
    """Three partitions, one led by each broker: the coordinator's markers go to every
    leader; read_committed sees only committed records, read_uncommitted all of them."""
    topic, partitions = "txns", 3
    create(cluster, topic, partitions)
    assert {cluster.partition(topic, p).leader for p in range(partitions)} == {1, 2, 3}
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "cluster-txn",
                         "linger.ms": 5})
    producer.init_transactions(30)
    committed: list[bytes] = []
    aborted: list[bytes] = []
    for round_, outcome in enumerate(("commit", "abort", "commit")):
        producer.begin_transaction()
        values = [b"%s-%d-%d" % (outcome.encode(), round_, i) for i in range(30)]
        for i, value in enumerate(values):
            producer.produce(topic, value=value, partition=i % partitions)
        if outcome == "commit":
            producer.commit_transaction(30)
            committed += values
        else:
            producer.flush(30)  # the records are in the logs before the abort marker
            producer.abort_transaction(30)
            aborted += values
    seen = _read_all(cluster.bootstrap, topic, partitions, "read_committed")
    assert sorted(seen) == sorted(committed)
    everything = _read_all(cluster.bootstrap, topic, partitions, "read_uncommitted")
    assert sorted(everything) == sorted(committed + aborted)

    # A fenced producer (same transactional id, older epoch) can no longer commit.
    newer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "cluster-txn"})
    newer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"zombie", partition=0)
    with pytest.raises(KafkaException):
        producer.commit_transaction(30)
    assert b"zombie" not in _read_all(cluster.bootstrap, topic, partitions, "read_committed")
