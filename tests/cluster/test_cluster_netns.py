"""Network partitions between cluster hosts, with Linux network namespaces (tests/helpers/netns.py).

etcd and each of three brokers run in a namespace of their own, joined by one bridge,
each on its own private address; the test's clients (confluent-kafka, our raw client)
reach them through a veth of the root namespace. A host is cut off by taking its bridge
port down: packets vanish, no connection is reset, as when a switch port or a cable
fails; healing brings the port back. Needs root (``ip netns``): where that is missing the
tests fail, they do not skip.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest
from helpers.cluster_clients import (
    ContinuousProducer,
    consume_all,
    create,
    log_bytes,
    wait_for_progress,
)
from helpers.clusterprocs import Cluster, EtcdProcess
from helpers.kafkaclient import BlockingClient, fetch_request, produce_request, produce_to_leader
from helpers.netns import NetLab, netlab, reachable
from helpers.waiting import wait_until

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import MetadataRequest

pytestmark = pytest.mark.slow

NODES = (1, 2, 3)


@pytest.fixture
def lab() -> Iterator[NetLab]:
    with netlab(["etcd", *(f"node{n}" for n in NODES)]) as built:
        yield built


@pytest.fixture
def cluster(tmp_path, lab) -> Iterator[Cluster]:
    etcd = EtcdProcess(tmp_path / "etcd-data", netns=lab.namespaces["etcd"],
                       host=lab.addresses["etcd"])
    etcd.start()
    try:
        nodes = Cluster(tmp_path, etcd, len(NODES),
                        hosts={n: (lab.namespaces[f"node{n}"], lab.addresses[f"node{n}"])
                               for n in NODES},
                        **{"min.insync.replicas": 2, "default.replication.factor": 3,
                           "replica.lag.time.max.ms": 5000})
        try:
            yield nodes.start()
        finally:
            for name in lab.ports:  # a failed test may have left a host cut off
                with contextlib.suppress(RuntimeError):
                    lab.heal(name)
                with contextlib.suppress(RuntimeError):
                    lab.isolate([name], on=False)
            nodes.stop()
    finally:
        etcd.stop()


@contextlib.contextmanager
def cut_off(lab: NetLab, cluster: Cluster, node: int) -> Iterator[None]:
    """Broker ``node`` unreachable (and left out of the clients' bootstrap list) inside."""
    lab.cut(f"node{node}")
    cluster.paused.add(node)  # not asked for metadata meanwhile
    try:
        yield
    finally:
        lab.heal(f"node{node}")
        cluster.paused.discard(node)


def view_of(cluster: Cluster, node: int, topic: str) -> tuple[int, int, list[int]]:
    """(leader, leader epoch, ISR) of partition 0 as broker ``node`` itself reports it:
    a broker that missed the changes made while it was cut off still shows the old ones."""
    broker = cluster.brokers[node]
    client = BlockingClient(broker.port, host=broker.host, timeout=10)
    try:
        answer = client.call(ApiKey.METADATA, 9, MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
            allow_auto_topic_creation=False))
    finally:
        client.close()
    part = answer.topics[0].partitions[0]
    return part.leader_id, part.leader_epoch, sorted(part.isr_nodes)


def _check_acknowledged(cluster: Cluster, producer: ContinuousProducer, others: int = 0) -> list[bytes]:
    """Every acknowledged record present exactly once, offsets dense, order kept
    (``others``: records written to the topic besides the producer's)."""
    assert not producer.failed, producer.failed[:5]
    records = consume_all(cluster.bootstrap, producer.topic, len(producer.acked) + others, timeout=60)
    values = [value for _, value in records]
    assert [offset for offset, _ in records] == list(range(len(records)))  # dense
    assert len(set(values)) == len(values), "duplicates"
    assert set(producer.acked) <= set(values), "acknowledged records lost"
    assert values == sorted(values), "order"
    return values


def _identical_replicas(cluster: Cluster, topic: str) -> None:
    wait_until(lambda: len(cluster.partition(topic, 0).isrs) == 3, 60, f"every replica of {topic} in sync")
    wait_until(lambda: len({log_bytes(b, topic) for b in cluster.brokers.values()}) == 1,
               30, f"byte-identical replicas of {topic}")


def test_leader_cut_off_acknowledges_nothing_and_rejoins_after_truncating(cluster, lab):
    create(cluster, "cut", partitions=1, rf=3)
    old = cluster.partition("cut", 0).leader
    broker = cluster.brokers[old]
    # A client on the leader's own host: it still reaches the leader while the host is cut
    # off from the others.
    local = lab.inside(f"node{old}", lambda: BlockingClient(broker.port, host=broker.host))
    try:
        assert produce_to_leader(local, produce_request("cut", 0, [b"-first"])) == ErrorCode.NONE
        with ContinuousProducer("confluent-kafka", cluster.bootstrap, "cut") as producer:
            wait_for_progress([producer])
            with cut_off(lab, cluster, old):
                assert not reachable(broker.host, broker.port)
                # Appended by the cut-off leader alone; the ISR cannot shrink (etcd is out
                # of its reach too), so acks=all can never be answered with success.
                local.send(ApiKey.PRODUCE, 7, produce_request(
                    "cut", 0, [b"9999999-stranded"], timeout_ms=8000))
                new = wait_until(lambda: (p := cluster.partition("cut", 0)) is not None
                                 and p.leader not in (-1, old) and p, 30, "a new leader")
                assert old not in new.isrs
                wait_for_progress([producer])  # the producer goes on with the new leader
                answer = local.recv().responses[0].partition_responses[0]
                assert answer.error_code != ErrorCode.NONE, "a cut-off leader acknowledged acks=all"
                # It did append it: the divergent tail it must drop when it rejoins.
                assert b"9999999-stranded" in log_bytes(broker, "cut")
            # Healed: it learns of the new leader, truncates its tail, catches up, rejoins
            # (asked on the new leader, and on the old one itself: no stale view left).
            cluster.wait_for_brokers(set(NODES))
            for node in (new.leader, old):
                wait_until(lambda n=node: view_of(cluster, n, "cut")[2] == sorted(NODES), 60,
                           f"broker {node} to show the old leader back in the ISR")
            assert view_of(cluster, old, "cut")[:2] == view_of(cluster, new.leader, "cut")[:2]
            assert view_of(cluster, old, "cut")[0] != old
            wait_for_progress([producer])
    finally:
        local.close()
    values = _check_acknowledged(cluster, producer, others=1)
    assert values[0] == b"-first" and b"9999999-stranded" not in values
    assert b"9999999-stranded" not in log_bytes(broker, "cut")  # truncated away
    _identical_replicas(cluster, "cut")


def test_etcd_cut_off_from_everyone_leaders_step_down_and_come_back(cluster, lab):
    create(cluster, "etcd-cut", partitions=1, rf=3)
    leader = cluster.partition("etcd-cut", 0).leader
    broker = cluster.brokers[leader]
    with ContinuousProducer("confluent-kafka", cluster.bootstrap, "etcd-cut") as producer:
        wait_for_progress([producer])
        lab.cut("etcd")
        cut_at = time.monotonic()
        try:
            assert not reachable(cluster.etcd.host, cluster.etcd.port)
            # No broker can renew its session. Once a session timeout has passed without
            # a renewal, etcd may have expired the leader's session and handed its
            # partitions to another broker, so the leader stops acknowledging
            # (NOT_LEADER_OR_FOLLOWER) on its own clock, though here no one could take
            # over.
            client = BlockingClient(broker.port, host=broker.host, timeout=10)
            try:
                wait_until(lambda: client.call(ApiKey.FETCH, 11, fetch_request("etcd-cut", 0, 0))
                           .responses[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER,
                           10, "the leader to step down without its session")
            finally:
                client.close()
            # Cut off for twice the session timeout: every lease expires inside etcd.
            wait_until(lambda: time.monotonic() > cut_at + 6, 10, "twice the session timeout")
        finally:
            lab.heal("etcd")
        # Back: the brokers find their sessions gone, register again, and the controller
        # hands out leaderships; the producer carries on, nothing acknowledged is lost.
        cluster.wait_for_brokers(set(NODES))
        wait_until(lambda: (p := cluster.partition("etcd-cut", 0)) is not None
                   and p.leader in NODES and len(p.isrs) == 3, 60, "a leader with a full ISR")
        wait_for_progress([producer])
    _check_acknowledged(cluster, producer)
    _identical_replicas(cluster, "etcd-cut")


def test_follower_cut_off_leaves_the_isr_and_returns_after_healing(cluster, lab):
    create(cluster, "minority", partitions=1, rf=3)
    state = cluster.partition("minority", 0)
    follower = next(n for n in NODES if n != state.leader)
    with ContinuousProducer("confluent-kafka", cluster.bootstrap, "minority") as producer:
        wait_for_progress([producer])
        with cut_off(lab, cluster, follower):
            wait_until(lambda: sorted(cluster.partition("minority", 0).isrs) ==
                       sorted(n for n in NODES if n != follower), 30, "the ISR to shrink")
            wait_for_progress([producer])  # 2 in sync = min.insync.replicas: writes go on
            assert cluster.partition("minority", 0).leader == state.leader
        cluster.wait_for_brokers(set(NODES))
        wait_until(lambda: len(cluster.partition("minority", 0).isrs) == 3, 60, "the ISR to grow back")
        wait_for_progress([producer])
    _check_acknowledged(cluster, producer)
    _identical_replicas(cluster, "minority")


def test_leader_cut_off_from_its_followers_only_refuses_acks_all(cluster, lab):
    """A partial partition: the brokers lose one another but each still reaches etcd
    (and the clients). The leader keeps its session, so no one else is elected; its
    followers cannot fetch, it shrinks the ISR to itself, and acks=all is refused with
    NOT_ENOUGH_REPLICAS (min.insync.replicas=2) rather than acknowledged by one copy."""
    create(cluster, "split", partitions=1, rf=3)
    leader = cluster.partition("split", 0).leader
    broker = cluster.brokers[leader]
    client = BlockingClient(broker.port, host=broker.host)
    brokers = [f"node{n}" for n in NODES]
    try:
        assert produce_to_leader(client, produce_request("split", 0, [b"a"])) == ErrorCode.NONE
        lab.isolate(brokers)
        try:
            wait_until(lambda: view_of(cluster, leader, "split")[2] == [leader], 30,
                       "the ISR to shrink to the leader")
            refused = client.call(ApiKey.PRODUCE, 7, produce_request("split", 0, [b"b"]))
            assert refused.responses[0].partition_responses[0].error_code == \
                ErrorCode.NOT_ENOUGH_REPLICAS
            assert view_of(cluster, leader, "split")[:2] == (leader, 0)  # still the leader
        finally:
            lab.isolate(brokers, on=False)
        wait_until(lambda: view_of(cluster, leader, "split")[2] == sorted(NODES), 60,
                   "the followers back in the ISR")
        assert produce_to_leader(client, produce_request("split", 0, [b"c"])) == ErrorCode.NONE
    finally:
        client.close()
    assert [v for _, v in consume_all(cluster.bootstrap, "split", 2)] == [b"a", b"c"]
    _identical_replicas(cluster, "split")


def test_a_killed_runs_namespaces_are_swept_by_the_next_lab(tmp_path):
    """A test process SIGKILLed mid-run never deletes its namespaces; the next lab built
    on this machine deletes those of tags whose process is gone, and only those."""
    import signal
    import subprocess
    import sys

    from helpers.netns import ip

    script = ("import os, signal, sys; sys.path.insert(0, 'tests'); "
              "from helpers.netns import NetLab; lab = NetLab(['a', 'b']).start(); "
              "print(lab.tag, flush=True); os.kill(os.getpid(), signal.SIGKILL)")
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=60)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    tag = killed.stdout.strip()
    left = {f"ls{tag}-hub", f"ls{tag}-a", f"ls{tag}-b"}

    def names() -> set[str]:
        return {line.split()[0] for line in ip("netns", "list").splitlines() if line.strip()}

    assert left <= names()  # what a killed run leaves behind
    with netlab(["c"]) as built:
        assert not left & names()
        assert set(built.namespaces.values()) | {built.hub} <= names()  # ours are kept
    assert f"l{tag}r" not in ip("-o", "link", "show")
