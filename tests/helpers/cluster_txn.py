"""Transactions on a test cluster: the transaction coordinator of an id (the leader of its
__transaction_state partition), transactional confluent-kafka producers, and what a
read_committed consumer gets once no transaction is open."""

from __future__ import annotations

import time
from collections.abc import Iterable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from helpers.cluster_clients import create
from helpers.clusterprocs import Cluster
from helpers.waiting import wait_until
from logserver.groups.store import kafka_partition_for

TXN_STATE = "__transaction_state"
TXN_PARTITIONS = 50  # Kafka's transaction.state.log.num.partitions
PARTITIONS = 3  # of the tests' topics


def create_txn_topic(cluster: Cluster, topic: str) -> None:
    """A topic of ``PARTITIONS`` partitions, three replicas each, all in sync."""
    create(cluster, topic, PARTITIONS, 3, timeout=30)


def txn_coordinator(cluster: Cluster, txn_id: str) -> int:
    """The leader of the id's __transaction_state partition once its replicas are in sync
    (so killing it leaves a replica with the whole state)."""
    index = kafka_partition_for(txn_id, TXN_PARTITIONS)

    def in_sync() -> int | None:
        part = cluster.partition(TXN_STATE, index)
        return part.leader if part is not None and len(part.isrs) == 3 else None
    return int(wait_until(in_sync, 30, f"{TXN_STATE}-{index} in sync"))


def txn_producer(cluster: Cluster, txn_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id,
                         "linger.ms": 5, "transaction.timeout.ms": 60000})
    producer.init_transactions(60)
    return producer


def watermarks_or_none(bootstrap: str, topic: str, partitions: Iterable[int]) -> dict[int, int] | None:
    """The partitions' high watermarks (a read_committed consumer would be told the last
    stable offset, which stops at an open transaction); None when the query fails. Right
    after a failover a broker may still name no leader for a partition (the dead or
    resumed broker's key is gone from etcd, the controller has not moved its leaderships
    yet), and librdkafka's watermark query fails at once on that ("Local: Unknown
    partition", seen with a just-resumed broker answering; or NOT_LEADER_FOR_PARTITION
    from a stale leader): callers poll with a fresh client each time."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "hw",
                         "isolation.level": "read_uncommitted"})
    try:
        return {p: int(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=20,
                                                      cached=False)[1])
                for p in partitions}
    except KafkaException:
        return None
    finally:
        consumer.close()


def high_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    """Every partition's, once a failover has settled enough to answer (at most a minute)."""
    return wait_until(lambda: watermarks_or_none(bootstrap, topic, range(PARTITIONS)), 60,
                      f"the high watermarks of {topic}")


def read_committed(bootstrap: str, topic: str) -> list[bytes]:
    """Every record a read_committed consumer gets, up to each partition's high watermark:
    it gets there only once no transaction is open below it."""
    ends = high_watermarks(bootstrap, topic)
    return read_to_ends({"bootstrap.servers": bootstrap, "group.id": "reader",
                         "isolation.level": "read_committed"}, topic, range(PARTITIONS), ends)


def read_to_ends(config: dict[str, object], topic: str, partitions: Iterable[int],
                 ends: dict[int, int] | None = None) -> list[bytes]:
    """Every record value a consumer made from ``config`` gets from the start of each
    partition up to ``ends`` (by default the high watermarks it reads itself)."""
    wanted = list(partitions)
    consumer = Consumer({**config, "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        if ends is None:
            ends = {p: int(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10,
                                                          cached=False)[1]) for p in wanted}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in wanted])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while True:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
            positions = consumer.position([TopicPartition(topic, p) for p in wanted])
            if all(tp.offset >= ends[tp.partition] or ends[tp.partition] == 0 for tp in positions):
                return values
            assert time.monotonic() < deadline, f"stuck at {positions}, ends {ends}"
    finally:
        consumer.close()


def txn_coordinator_or_none(cluster: Cluster, txn_id: str) -> int | None:
    part = cluster.partition(TXN_STATE, kafka_partition_for(txn_id, TXN_PARTITIONS))
    return None if part is None or part.leader < 0 else int(part.leader)
