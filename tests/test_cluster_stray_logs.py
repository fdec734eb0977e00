"""Stray logs: a broker that comes back deletes its local log of a topic deleted while
it was away, and of one deleted and created again under the same name (another topic id),
as Kafka's brokers do; the data of topics that still exist stays. Three real brokers on
a real etcd, confluent-kafka's AdminClient, producer and consumer."""

from __future__ import annotations

import json

import pytest
from clusterprocs import running_cluster, wait_until
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from test_cluster import create
from test_cluster_partitions import produce

from logserver.cluster.local_topics import FILE_NAME
from logserver.log.partition_metadata import read_topic_id

pytestmark = pytest.mark.slow


def _bytes(broker, topic: str, partition: int) -> bytes:
    where = broker.partition_dir(topic, partition)
    return b"".join(f.read_bytes() for f in sorted(where.glob("*.log"))) if where.is_dir() else b""


def _watermarks(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "stray-check"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, i), timeout=10)
                for i in range(partitions)]
    finally:
        consumer.close()


def _values(bootstrap: str, topic: str, partition: int, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "stray-read",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        out: list[bytes] = []
        wait_until(lambda: ((m := consumer.poll(0.2)) is not None and m.error() is None
                            and out.append(m.value())) or len(out) >= count, 30,
                   f"{count} records of {topic}-{partition}")
        return out
    finally:
        consumer.close()


def test_a_topic_deleted_while_a_broker_was_down_is_deleted_there(tmp_path) -> None:
    with running_cluster(tmp_path, 3, **{"min.insync.replicas": 2,
                                         "default.replication.factor": 3}) as cluster:
        create(cluster, "gone", partitions=2, rf=3)
        create(cluster, "kept", partitions=1, rf=3)
        produce(cluster.bootstrap, "gone", [(0, b"old-0"), (1, b"old-1")])
        produce(cluster.bootstrap, "kept", [(0, b"kept")])
        b3 = cluster.brokers[3]
        wait_until(lambda: all(_bytes(b3, t, p) for t, p in [("gone", 0), ("gone", 1), ("kept", 0)]),
                   30, "broker 3 to hold gone-0, gone-1 and kept-0")
        kept_before = _bytes(b3, "kept", 0)
        assert b3.stop() == 0
        cluster.wait_for_brokers({1, 2})
        admin1 = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
        admin1.delete_topics(["gone"])["gone"].result(timeout=30)
        wait_until(lambda: "gone" not in cluster.metadata().topics, 30, "gone to be deleted")
        assert b3.partition_dir("gone", 0).is_dir(), "broker 3 was down: its copy is there"

        b3.start()
        cluster.wait_for_brokers({1, 2, 3})
        wait_until(lambda: not b3.partition_dir("gone", 0).exists()
                   and not b3.partition_dir("gone", 1).exists(), 30,
                   "broker 3 to delete its stray log of gone")
        assert "local log of gone: the topic was deleted from the cluster" in b3.output_tail(200_000)
        assert _bytes(b3, "kept", 0).startswith(kept_before), "an existing topic's data stays"
        # The directories go (renamed) before the deletion ends and the record is dropped.
        wait_until(lambda: "gone" not in json.loads((b3.data_dir / FILE_NAME).read_text())["topics"],
                   30, "broker 3 to drop its record of gone")
        recorded = json.loads((b3.data_dir / FILE_NAME).read_text())["topics"]
        assert "kept" in recorded and "gone" not in recorded

        # The name again, led by broker 3: fresh data only.
        admin = cluster.admin()
        admin.create_topics([NewTopic("gone", 2, replica_assignment=[[3, 1, 2], [3, 2, 1]])])[
            "gone"].result(timeout=30)
        wait_until(lambda: all((p := cluster.partition("gone", i)) is not None and p.leader == 3
                               and len(p.isrs) == 3 for i in range(2)), 30,
                   "the new gone led by broker 3, all in sync")
        produce(cluster.bootstrap, "gone", [(0, b"new-0"), (1, b"new-1")])
        assert _watermarks(cluster.bootstrap, "gone", 2) == [(0, 1), (0, 1)]
        assert _values(cluster.bootstrap, "gone", 0, 1) == [b"new-0"]
        assert _values(cluster.bootstrap, "gone", 1, 1) == [b"new-1"]


def test_a_topic_created_again_while_a_broker_was_away_is_replaced_there(tmp_path) -> None:
    """Broker 3 hangs (SIGSTOP) while the topic is deleted and created again with broker 3
    among its replicas, then dies (kill -9): when it is back, its old log is replaced by a
    copy of the new topic. (Kept, it would pass for a replica: both logs start at leader
    epoch 0, so OffsetForLeaderEpoch would keep the old records below the new epoch-0 end.)"""
    with running_cluster(tmp_path, 3, **{"min.insync.replicas": 2, "default.replication.factor": 3,
                                         "broker.session.timeout.ms": 10000}) as cluster:
        admin = cluster.admin()
        admin.create_topics([NewTopic("again", 1, replica_assignment=[[1, 2, 3]])])[
            "again"].result(timeout=30)
        wait_until(lambda: (p := cluster.partition("again", 0)) is not None and len(p.isrs) == 3,
                   30, "again in sync on 3 brokers")
        produce(cluster.bootstrap, "again", [(0, b"old-%d" % i) for i in range(5)])
        b3 = cluster.brokers[3]
        wait_until(lambda: b"old-4" in _bytes(b3, "again", 0), 30, "broker 3 to have old-4")
        old_local_id = read_topic_id(b3.partition_dir("again", 0))

        cluster.pause(3)  # still registered (its session lasts 10 s), not reading etcd
        admin1 = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
        admin1.delete_topics(["again"])["again"].result(timeout=30)
        admin1.create_topics([NewTopic("again", 1, replica_assignment=[[1, 2, 3]])])[
            "again"].result(timeout=30)
        b3.kill9()
        cluster.paused.discard(3)
        wait_until(lambda: (p := cluster.partition("again", 0)) is not None and p.leader == 1
                   and sorted(p.isrs) == [1, 2], 60, "broker 3 out of the new again's ISR")
        produce(cluster.bootstrap, "again", [(0, b"new-%d" % i) for i in range(2)])

        b3.start()
        cluster.wait_for_brokers({1, 2, 3})
        wait_until(lambda: sorted((p := cluster.partition("again", 0)).isrs) == [1, 2, 3]
                   and p is not None, 60, "broker 3 back in the ISR of the new again")
        leader = cluster.brokers[cluster.partition("again", 0).leader]
        wait_until(lambda: _bytes(b3, "again", 0) == _bytes(leader, "again", 0), 30,
                   "broker 3's copy byte-identical with the leader's")
        assert b"old-" not in _bytes(b3, "again", 0)
        assert "deleted and created again" in b3.output_tail(200_000)
        assert read_topic_id(b3.partition_dir("again", 0)) != old_local_id, "a new local log"
        assert _watermarks(cluster.bootstrap, "again", 1) == [(0, 2)]


def test_records_written_for_another_etcd_delete_nothing(tmp_path) -> None:
    """A data directory whose records name another etcd cluster (etcd wiped, or another
    prefix): a topic missing from this etcd is not taken for deleted."""
    with running_cluster(tmp_path, 3, **{"min.insync.replicas": 2,
                                         "default.replication.factor": 3}) as cluster:
        create(cluster, "elsewhere", partitions=1, rf=3)
        produce(cluster.bootstrap, "elsewhere", [(0, b"keep me")])
        b3 = cluster.brokers[3]
        wait_until(lambda: b"keep me" in _bytes(b3, "elsewhere", 0), 30, "broker 3's copy")
        assert b3.stop() == 0
        records = b3.data_dir / FILE_NAME
        written = json.loads(records.read_text())
        assert "elsewhere" in written["topics"]
        records.write_text(json.dumps({**written, "incarnation": "another-etcd"}))
        admin1 = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
        admin1.delete_topics(["elsewhere"])["elsewhere"].result(timeout=30)
        wait_until(lambda: "elsewhere" not in cluster.metadata().topics, 30, "the deletion")

        b3.start()
        cluster.wait_for_brokers({1, 2, 3})
        wait_until(lambda: "was written for another etcd cluster" in b3.output_tail(200_000),
                   30, "broker 3 to say so")
        create(cluster, "after", partitions=1, rf=3)  # a full reconcile pass went by since
        assert b"keep me" in _bytes(b3, "elsewhere", 0)
        assert "deleted the local log of elsewhere" not in b3.output_tail(200_000)


def test_a_data_directory_from_before_the_records_is_adopted(tmp_path) -> None:
    """Broker 3's data directory without ``cluster-topic-ids`` (as written before it
    existed): its logs of the cluster's topics are recorded as theirs and kept; once
    recorded, a topic deleted while it is down goes when it is back."""
    with running_cluster(tmp_path, 3, **{"min.insync.replicas": 2,
                                         "default.replication.factor": 3}) as cluster:
        create(cluster, "older", partitions=1, rf=3)
        produce(cluster.bootstrap, "older", [(0, b"keep me")])
        b3 = cluster.brokers[3]
        wait_until(lambda: b"keep me" in _bytes(b3, "older", 0), 30, "broker 3's copy")
        assert b3.stop() == 0
        (b3.data_dir / FILE_NAME).unlink()
        b3.start()
        wait_until(lambda: (b3.data_dir / FILE_NAME).exists() and "older" in json.loads(
            (b3.data_dir / FILE_NAME).read_text())["topics"], 30, "older recorded")
        wait_until(lambda: sorted(cluster.partition("older", 0).isrs) == [1, 2, 3], 30,
                   "broker 3 in sync again")
        assert b"keep me" in _bytes(b3, "older", 0)

        assert b3.stop() == 0
        admin1 = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
        admin1.delete_topics(["older"])["older"].result(timeout=30)
        wait_until(lambda: "older" not in cluster.metadata().topics, 30, "the deletion")
        b3.start()
        wait_until(lambda: not b3.partition_dir("older", 0).exists(), 30,
                   "broker 3 to delete its stray log of older")
