"""A new leader whose high watermark lags its log end answers ListOffsets(latest) with
OFFSET_NOT_AVAILABLE, as Kafka does (KIP-207, ``Partition.fetchOffsetForTimestamp``).

A follower learns the high watermark one fetch after the leader moved it, so when it
is elected its high watermark can be below records the old leader acknowledged. Its
log holds them (they were in the ISR's logs), but until the other in-sync followers
fetch from it, its high watermark stays behind; answering "latest" with it would tell a
client that an acknowledged record is not there yet (the fault run, tests/helpers/faultrun,
caught this as a stale read after leader failovers). Kafka refuses instead, with a
retriable error, while the high watermark is below the offset the leader's epoch began at.

Made deterministic here: broker 3 (with a session long enough to outlive its pause) is
stopped with SIGSTOP, so the leader appends a record that broker 2 copies but the high
watermark cannot cover; the leader is killed; broker 2 takes over with broker 3 still
in the ISR and cannot move its high watermark until broker 3 fetches again.
"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import NewTopic
from helpers.cluster_clients import log_bytes
from helpers.clusterprocs import Cluster
from helpers.kafkaclient import (
    BlockingClient,
    list_offsets_request,
    produce_request,
    produce_to_leader,
)
from helpers.waiting import wait_until

from kafkaproto import ApiKey, ErrorCode

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path, etcd):
    nodes = Cluster(tmp_path, etcd, 3, **{"min.insync.replicas": 2,
                                          "replica.lag.time.max.ms": 8000})
    # Broker 3 keeps its session through its pause: it stays in the ISR.
    nodes.brokers[3].settings["broker.session.timeout.ms"] = 60000
    try:
        yield nodes.start()
    finally:
        nodes.stop()


def _latest(cluster: Cluster, node: int) -> tuple[int, int]:
    client = BlockingClient(cluster.brokers[node].port, timeout=10)
    try:
        answer = client.call(ApiKey.LIST_OFFSETS, 4, list_offsets_request("lag", 0))
    finally:
        client.close()
    part = answer.topics[0].partitions[0]
    return int(part.error_code), int(part.offset)


def test_new_leader_with_a_lagging_high_watermark_refuses_latest_offset(cluster):
    admin = cluster.admin()
    admin.create_topics([NewTopic("lag", 1, replica_assignment=[[1, 2, 3]])])["lag"].result(timeout=30)
    wait_until(lambda: (p := cluster.partition("lag", 0)) is not None and p.leader == 1
               and len(p.isrs) == 3, 30, "lag-0 led by broker 1 with 3 replicas in sync")
    leader = BlockingClient(cluster.brokers[1].port, timeout=30)
    try:
        assert produce_to_leader(leader, produce_request("lag", 0, [b"acked"])) == ErrorCode.NONE
        cluster.pause(3)
        try:
            # Appended by broker 1 and copied by broker 2; broker 3, still in the ISR,
            # does not fetch it, so the high watermark stays at 1.
            leader.send(ApiKey.PRODUCE, 7, produce_request("lag", 0, [b"unacknowledged"]))
            wait_until(lambda: b"unacknowledged" in log_bytes(cluster.brokers[2], "lag"), 30,
                       "broker 2 to copy the record")
            cluster.brokers[1].kill9()
            wait_until(lambda: (p := cluster.partition("lag", 0)) is not None and p.leader == 2,
                       30, "broker 2 to lead lag-0")
            # Broker 2's log ends at 2 (where its epoch began), its high watermark is 1.
            assert _latest(cluster, 2) == (ErrorCode.OFFSET_NOT_AVAILABLE, -1)
        finally:
            cluster.resume(3)
    finally:
        leader.close()
    # Broker 3 fetches from the new leader: the high watermark reaches the epoch's start.
    wait_until(lambda: _latest(cluster, 2) == (ErrorCode.NONE, 2), 30, "latest offset 2")
