"""Broker sessions (etcd leases) going wrong, against real etcd and three real brokers.

- One broker cut off from etcd alone (its etcd traffic goes through a forwarder of the
  test's own, paused with SIGSTOP; clients and the other brokers still reach it): once a
  session timeout has passed without a renewal it stops leading and coordinating on its
  own clock, so it never answers with state older than what the brokers that took over
  have acknowledged.
- etcd itself paused past the session timeout (every session lost at once): Metadata
  from every broker names that broker and every broker throughout, and a transactional
  producer (librdkafka, which drops brokers a Metadata answer leaves out) finishes its
  transactions afterwards within its transaction timeout.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from helpers.cluster_clients import create
from helpers.clusterprocs import Cluster, EtcdProcess
from helpers.kafkaclient import BlockingClient, fetch_request, produce_request, produce_to_leader
from helpers.tcpforward import TcpForwarder
from helpers.waiting import wait_until

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import (
    FindCoordinatorRequest,
    InitProducerIdRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from logserver.groups.store import kafka_partition_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SESSION_S = 3  # broker.session.timeout.ms of clusterprocs.Cluster, in seconds
NODES = {1, 2, 3}
VICTIM = 3  # the broker cut off from etcd
OFFSETS = "__consumer_offsets"
TXN_STATE = "__transaction_state"
INTERNAL_PARTITIONS = 50  # Kafka's defaults for both
SETTINGS = {"min.insync.replicas": 2, "default.replication.factor": 3,
            "replica.lag.time.max.ms": 5000}


@pytest.fixture
def isolatable(tmp_path, etcd: EtcdProcess) -> Iterator[tuple[Cluster, TcpForwarder]]:
    """Three brokers; VICTIM reaches etcd only through a forwarder the test can pause."""
    forwarder = TcpForwarder(tmp_path / "tcpforward.log", etcd.address)
    forwarder.start()
    try:
        nodes = Cluster(tmp_path, etcd, 3, **SETTINGS)
        nodes.brokers[VICTIM].settings["cluster.etcd.endpoints"] = forwarder.address
        try:
            yield nodes.start(), forwarder
        finally:
            forwarder.resume()
            nodes.stop()
    finally:
        forwarder.stop()


def _call(node: int, cluster: Cluster, api: int, version: int, request: Any) -> Any:
    client = BlockingClient(cluster.brokers[node].port, timeout=10)
    try:
        return client.call(api, version, request)
    finally:
        client.close()


def _coordinator(cluster: Cluster, asked: int, key: str, key_type: int) -> int | None:
    """FindCoordinator at broker ``asked``: the coordinator's node id, None on an error."""
    answer = _call(asked, cluster, ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
        key_type=key_type, coordinator_keys=[key])).coordinators[0]
    return int(answer.node_id) if answer.error_code == ErrorCode.NONE else None


def _led_by(cluster: Cluster, topic: str, node: int, prefix: str, key_type: int) -> str:
    """A group (key_type 0) or transactional id (1) whose partition of ``topic`` ``node``
    leads with every replica in sync (the first FindCoordinator creates the topic)."""
    wait_until(lambda: _coordinator(cluster, 1, f"{prefix}-probe", key_type) is not None, 60,
               f"a coordinator for {prefix}-probe")

    def in_sync() -> Any:
        found = cluster.metadata().topics.get(topic)
        return found is not None and len(found.partitions) == INTERNAL_PARTITIONS and all(
            len(p.isrs) == 3 for p in found.partitions.values()) and found
    meta = wait_until(in_sync, 60, f"{topic} in sync")
    keys = [f"{prefix}-{i}" for i in range(1000)]
    return next(k for k in keys
                if meta.partitions[kafka_partition_for(k, INTERNAL_PARTITIONS)].leader == node)


def _commit(node: int, cluster: Cluster, group: str, topic: str, offset: int) -> int:
    response = _call(node, cluster, ApiKey.OFFSET_COMMIT, 7, OffsetCommitRequest(
        group_id=group, topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
            name=topic, partitions=[OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=offset)])]))
    return int(response.topics[0].partitions[0].error_code)


def _committed(node: int, cluster: Cluster, group: str, topic: str) -> tuple[int, int]:
    """OffsetFetch at ``node``: (error code, committed offset)."""
    response = _call(node, cluster, ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(
        group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
            name=topic, partition_indexes=[0])]))
    if response.error_code != ErrorCode.NONE:
        return int(response.error_code), -1
    partition = response.topics[0].partitions[0]
    return int(partition.error_code), int(partition.committed_offset)


def _init_producer_id(node: int, cluster: Cluster, txn_id: str) -> int:
    return int(_call(node, cluster, ApiKey.INIT_PRODUCER_ID, 3, InitProducerIdRequest(
        transactional_id=txn_id, transaction_timeout_ms=60000)).error_code)


def _fetch_error(node: int, cluster: Cluster, topic: str, partition: int) -> int:
    response = _call(node, cluster, ApiKey.FETCH, 11, fetch_request(topic, partition, 0))
    return int(response.responses[0].partitions[0].error_code)


def _retried(what: Any) -> int:
    """``what()``'s error code once it is no longer a coordinator moving or loading."""
    moving = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
              ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return int(wait_until(lambda: (e := what()) not in moving and (e,), 60, "a coordinator")[0])


def test_a_broker_cut_off_from_etcd_stops_leading_and_coordinating(isolatable):
    cluster, forwarder = isolatable
    create(cluster, "cut", partitions=3, rf=3)
    meta = cluster.metadata().topics["cut"]
    led = next(i for i, p in meta.partitions.items() if p.leader == VICTIM)
    group = _led_by(cluster, OFFSETS, VICTIM, "cut-group", 0)
    txn_id = _led_by(cluster, TXN_STATE, VICTIM, "cut-txn", 1)
    assert _retried(lambda: _commit(VICTIM, cluster, group, "cut", 5)) == ErrorCode.NONE
    assert _committed(VICTIM, cluster, group, "cut") == (ErrorCode.NONE, 5)
    assert _retried(lambda: _init_producer_id(VICTIM, cluster, txn_id)) == ErrorCode.NONE
    assert _fetch_error(VICTIM, cluster, "cut", led) == ErrorCode.NONE

    forwarder.pause()
    paused_at = time.monotonic()

    def stepped_down() -> bool:
        return (_fetch_error(VICTIM, cluster, "cut", led) == ErrorCode.NOT_LEADER_OR_FOLLOWER
                and _committed(VICTIM, cluster, group, "cut")[0] == ErrorCode.NOT_COORDINATOR
                and _init_producer_id(VICTIM, cluster, txn_id) == ErrorCode.NOT_COORDINATOR)
    # Its last renewal was at most a quarter of the session before the pause.
    wait_until(stepped_down, SESSION_S + 2, "the cut-off broker to stop leading and coordinating")
    print(f"stepped down {time.monotonic() - paused_at:.2f} s after being cut off "
          f"(session timeout {SESSION_S} s)")
    produced = _call(VICTIM, cluster, ApiKey.PRODUCE, 7, produce_request("cut", led, [b"x"], acks=1))
    assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER

    # The group's new coordinator acknowledges a newer commit ...
    other = min(NODES - {VICTIM})
    new = wait_until(lambda: (c := _coordinator(cluster, other, group, 0)) not in (None, VICTIM) and c,
                     30, "a new coordinator for the group")
    assert _retried(lambda: _commit(new, cluster, group, "cut", 9)) == ErrorCode.NONE
    # ... and the cut-off broker never answers with the older one.
    answers = [_committed(VICTIM, cluster, group, "cut") for _ in range(20)]
    assert all(error == ErrorCode.NOT_COORDINATOR for error, _ in answers), answers

    forwarder.resume()
    # Back on etcd: it registers again and takes what the controller says (a follower
    # of the partition it led, back in its ISR); the group's commit is the newer one.
    wait_until(lambda: VICTIM in cluster.partition("cut", led).isrs, 60,
               f"broker {VICTIM} back in the ISR of cut-{led}")
    assert _committed(VICTIM, cluster, group, "cut") in (
        (ErrorCode.NOT_COORDINATOR, -1), (ErrorCode.NONE, 9))
    coordinator = wait_until(lambda: _coordinator(cluster, other, group, 0), 30, "a coordinator")
    assert _retried(lambda: _committed(coordinator, cluster, group, "cut")[0]) == ErrorCode.NONE
    assert _committed(coordinator, cluster, group, "cut") == (ErrorCode.NONE, 9)


def test_an_acks_all_write_its_leader_stops_leading_over_is_answered_possibly_persisted(isolatable):
    """The leader appended the batch and waits for its followers (paused) when it is cut
    off from etcd and stops leading. The batch may well survive on the next leader, so
    the answer must not be NOT_LEADER_OR_FOLLOWER, which clients take for "not
    persisted" (librdkafka then reuses the batch's sequence after an abort, and the next
    leader takes the next batch for a duplicate of it: a committed transaction without
    its records). REQUEST_TIMED_OUT, "possibly persisted", as for an ISR too slow."""
    cluster, forwarder = isolatable
    create(cluster, "stepdown", partitions=3, rf=3)
    led = next(i for i, p in cluster.metadata().topics["stepdown"].partitions.items()
               if p.leader == VICTIM)
    client = BlockingClient(cluster.brokers[VICTIM].port, timeout=60)
    try:
        assert produce_to_leader(client, produce_request("stepdown", led, [b"before"])) == \
            ErrorCode.NONE
        for node in NODES - {VICTIM}:  # nothing is replicated from now on
            cluster.pause(node)
        forwarder.pause()  # and the leader's session ends a session timeout from now
        # The request's own timeout is far away: the answer comes from the step-down.
        answer = client.call(ApiKey.PRODUCE, 7, produce_request(
            "stepdown", led, [b"appended, never replicated"], timeout_ms=3_600_000))
        partition = answer.responses[0].partition_responses[0]
        # Not leading any more: a new batch is refused before any append.
        refused = client.call(ApiKey.PRODUCE, 7, produce_request("stepdown", led, [b"after"]))
    finally:
        client.close()
        forwarder.resume()
        for node in NODES - {VICTIM}:
            cluster.resume(node)
    assert partition.error_code == ErrorCode.REQUEST_TIMED_OUT
    assert refused.responses[0].partition_responses[0].error_code == \
        ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert "session is lost" in cluster.brokers[VICTIM].output()


class MetadataPoller:
    """A thread asking every broker for Metadata over and over; the answers that did not
    name the answering broker and every broker."""

    def __init__(self, cluster: Cluster) -> None:
        self._clients = {n: BlockingClient(b.port, timeout=10) for n, b in cluster.brokers.items()}
        self.answers = 0
        self.bad: list[tuple[float, int, list[int] | str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        request = MetadataRequest(topics=None, allow_auto_topic_creation=False)
        while not self._stop.is_set():
            for node, client in self._clients.items():
                try:
                    named = sorted(b.node_id for b in client.call(ApiKey.METADATA, 9, request).brokers)
                except Exception as exc:  # a broker that stops answering is wrong too
                    self.bad.append((time.monotonic(), node, repr(exc)))
                    return
                self.answers += 1
                if set(named) != NODES:
                    self.bad.append((time.monotonic(), node, named))
            self._stop.wait(0.005)

    def __enter__(self) -> MetadataPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        for client in self._clients.values():
            client.close()


def test_metadata_names_every_broker_through_an_etcd_pause(cluster, etcd):
    create(cluster, "hiccup", partitions=3, rf=3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "hiccup",
                         "transaction.timeout.ms": 30000, "linger.ms": 5})
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(30):
        producer.produce("hiccup", value=b"aborted-%d" % i, partition=i % 3)
    assert producer.flush(30) == 0
    assert etcd.proc is not None
    with MetadataPoller(cluster) as poller:
        etcd.proc.send_signal(signal.SIGSTOP)  # alive, answering nothing
        try:
            # Paused for twice the session timeout: every lease is past its TTL.
            resume_at = time.monotonic() + 2 * SESSION_S
            wait_until(lambda: time.monotonic() > resume_at or poller.bad, 3 * SESSION_S,
                       "the end of the etcd pause")
        finally:
            etcd.proc.send_signal(signal.SIGCONT)
        # Every broker lost its session, registered again and has its replicas back.
        wait_until(lambda: all("registered again" in b.output() for b in cluster.brokers.values()),
                   60, "every broker to register again")
        wait_until(lambda: all(len(cluster.partition("hiccup", i).isrs) == 3 for i in range(3)),
                   60, "hiccup's replicas back in sync")
    assert poller.answers > 100, poller.answers
    assert not poller.bad, poller.bad[:10]

    started = time.monotonic()
    producer.abort_transaction(30)
    producer.begin_transaction()
    for i in range(30):
        producer.produce("hiccup", value=b"committed-%d" % i, partition=i % 3)
    producer.commit_transaction(30)
    print(f"abort and commit after the pause took {time.monotonic() - started:.2f} s")
    assert time.monotonic() - started < 30
    del producer  # librdkafka's producer has no close: let it go before the brokers do
    cluster.stop()
    for node, broker in cluster.brokers.items():
        assert "Task was destroyed but it is pending" not in broker.output(), node
