"""Cluster mode against real processes: Debian's etcd, three logserver brokers, and the
real clients (confluent-kafka's admin and producer, our own sans-I/O client core for
the raw protocol checks). Everything on 127.0.0.1, stopped by pid."""

from __future__ import annotations

import pytest
from clusterprocs import Cluster, EtcdProcess, wait_until
from confluent_kafka.admin import NewTopic
from kafkaclient import BlockingClient

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import FetchRequest, ProduceRequest
from tests.rawwire import record_batch

pytestmark = pytest.mark.slow


@pytest.fixture
def etcd(tmp_path):
    proc = EtcdProcess(tmp_path / "etcd-data")
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def cluster(tmp_path, etcd):
    nodes = Cluster(tmp_path, etcd, 3, **{"min.insync.replicas": 2,
                                          "default.replication.factor": 3,
                                          "replica.lag.time.max.ms": 5000})
    try:
        yield nodes.start()
    finally:
        nodes.stop()


def create(cluster: Cluster, topic: str, partitions: int = 3, rf: int = 3) -> None:
    admin = cluster.admin()  # kept alive until its futures are done
    futures = admin.create_topics([NewTopic(topic, partitions, rf)])
    futures[topic].result(timeout=20)
    wait_until(lambda: all((p := cluster.partition(topic, i)) is not None and len(p.isrs) == rf
                           for i in range(partitions)), 20, f"{topic} to have its replicas in sync")


def produce_request(topic: str, partition: int, values: list[bytes], acks: int = -1) -> ProduceRequest:
    return ProduceRequest(transactional_id=None, acks=acks, timeout_ms=10000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(
                index=partition, records=record_batch([(None, v) for v in values]))])])


def fetch_request(topic: str, partition: int, offset: int, epoch: int = -1) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                        isolation_level=0, session_id=0, session_epoch=-1, topics=[
                            FetchRequest.FetchTopic(topic=topic, partitions=[
                                FetchRequest.FetchPartition(
                                    partition=partition, current_leader_epoch=epoch,
                                    fetch_offset=offset, last_fetched_epoch=-1,
                                    log_start_offset=-1, partition_max_bytes=1 << 20)])],
                        forgotten_topics_data=[], rack_id="")


def test_brokers_register_and_one_controller_is_elected(cluster):
    meta = cluster.metadata()
    assert set(meta.brokers) == {1, 2, 3}
    assert all(b.host == "127.0.0.1" for b in meta.brokers.values())
    controller = meta.controller_id
    assert controller in (1, 2, 3)
    cluster.brokers[controller].kill9()
    # The controller's lease expires after the session timeout: another broker takes over
    # and the dead one disappears from Metadata.
    survivors = {1, 2, 3} - {controller}
    cluster.wait_for_brokers(survivors)
    wait_until(lambda: cluster.metadata().controller_id in survivors, 20, "a new controller")


def test_topic_replicas_spread_over_the_brokers_and_metadata_shows_them(cluster):
    create(cluster, "spread", partitions=3, rf=3)
    meta = cluster.metadata().topics["spread"]
    leaders = sorted(p.leader for p in meta.partitions.values())
    assert leaders == [1, 2, 3]  # one partition led by each broker
    for p in meta.partitions.values():
        assert sorted(p.replicas) == [1, 2, 3] and sorted(p.isrs) == [1, 2, 3]
    # CreateTopics for an existing topic, or with more replicas than brokers, is refused.
    admin = cluster.admin()
    again = admin.create_topics([NewTopic("spread", 1, 1), NewTopic("wide", 1, 4)])
    with pytest.raises(Exception, match="TOPIC_ALREADY_EXISTS|already exists"):
        again["spread"].result(timeout=20)
    with pytest.raises(Exception, match="INVALID_REPLICATION_FACTOR|replication factor"):
        again["wide"].result(timeout=20)


def test_non_leader_and_stale_epoch_are_refused(cluster):
    create(cluster, "route", partitions=1, rf=3)
    part = cluster.partition("route", 0)
    follower = next(n for n in (1, 2, 3) if n != part.leader)
    client = BlockingClient(cluster.brokers[follower].port)
    try:
        produced = client.call(ApiKey.PRODUCE, 7, produce_request("route", 0, [b"x"]))
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        fetched = client.call(ApiKey.FETCH, 11, fetch_request("route", 0, 0))
        assert fetched.responses[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    finally:
        client.close()
    client = BlockingClient(cluster.brokers[part.leader].port)
    try:
        produced = client.call(ApiKey.PRODUCE, 7, produce_request("route", 0, [b"a", b"b"]))
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        # Metadata reports leader epoch 0 for a new partition; an older one is fenced,
        # a newer one unknown, the current one served.
        current = client.call(ApiKey.FETCH, 11, fetch_request("route", 0, 0, epoch=0))
        assert current.responses[0].partitions[0].error_code == ErrorCode.NONE
        ahead = client.call(ApiKey.FETCH, 11, fetch_request("route", 0, 0, epoch=5))
        assert ahead.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    finally:
        client.close()
