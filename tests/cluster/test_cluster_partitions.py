"""CreatePartitions on a 3-node cluster: the new partitions get replicas on every broker,
leaders, an in-sync ISR and take acks=all writes; the old partitions keep their data.
Real etcd and brokers, confluent-kafka's AdminClient, producer and consumer.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import NewPartitions
from helpers.cluster_clients import consume_partitions, create, produce_partitions
from helpers.clusterprocs import running_cluster
from helpers.waiting import wait_until

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path):
    with running_cluster(tmp_path, 3, **{"min.insync.replicas": 2, "default.replication.factor": 3}) as nodes:
        yield nodes


def test_new_partitions_are_replicated_and_old_data_stays(cluster) -> None:
    create(cluster, "grow", partitions=2, rf=3)
    produce_partitions(cluster.bootstrap, "grow", [(0, b"p0-a"), (1, b"p1-a")])
    admin = cluster.admin()
    admin.create_partitions([NewPartitions("grow", 5)])["grow"].result(timeout=30)

    def grown() -> bool:
        parts = [cluster.partition("grow", i) for i in range(5)]
        return all(p is not None and p.leader > 0 and len(p.replicas) == 3 and len(p.isrs) == 3
                   for p in parts)

    wait_until(grown, 30, "five partitions, each with 3 replicas in sync")
    leaders = {cluster.partition("grow", i).leader for i in range(5)}
    assert len(leaders) > 1, "the new partitions' leaders spread over the brokers"
    produce_partitions(cluster.bootstrap, "grow", [(i, f"p{i}-b".encode()) for i in range(5)])
    assert sorted(consume_partitions(cluster.bootstrap, "grow", 5, 7)) == sorted(
        [b"p0-a", b"p1-a"] + [f"p{i}-b".encode() for i in range(5)])


def test_shrinking_a_topic_or_an_unknown_broker_is_refused(cluster) -> None:
    create(cluster, "fixed", partitions=3, rf=3)
    admin = cluster.admin()
    with pytest.raises(KafkaException, match="INVALID_PARTITIONS"):
        admin.create_partitions([NewPartitions("fixed", 2)])["fixed"].result(timeout=30)
    with pytest.raises(KafkaException, match="INVALID_REPLICA_ASSIGNMENT"):
        admin.create_partitions([NewPartitions("fixed", 4, replica_assignment=[[1, 2, 9]])])[
            "fixed"].result(timeout=30)
    admin.create_partitions([NewPartitions("fixed", 4, replica_assignment=[[3, 1, 2]])])[
        "fixed"].result(timeout=30)
    wait_until(lambda: (p := cluster.partition("fixed", 3)) is not None and p.leader == 3
               and sorted(p.isrs) == [1, 2, 3], 30, "partition 3 led by broker 3, all in sync")
