"""Cluster mode against real processes: Debian's etcd, three logserver brokers, and the
real clients (confluent-kafka's admin and producer, our own sans-I/O client core for
the raw protocol checks). Everything on 127.0.0.1, stopped by pid."""

from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from helpers.cluster_clients import (
    ContinuousProducer,
    consume_all,
    create,
    log_bytes,
    produce_partitions,
    wait_for_progress,
)
from helpers.clusterprocs import Cluster
from helpers.kafkaclient import (
    BlockingClient,
    fetch_request,
    list_offsets_request,
    produce_request,
    produce_to_leader,
)
from helpers.rawwire import record_batch
from helpers.waiting import wait_until

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.batch import iter_batches
from kafkaproto.messages import (
    InitProducerIdRequest,
)
from logserver.groups.store import kafka_partition_for

pytestmark = pytest.mark.slow


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
        listed = client.call(ApiKey.LIST_OFFSETS, 4, list_offsets_request("route", 0))
        assert listed.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    finally:
        client.close()
    client = BlockingClient(cluster.brokers[part.leader].port)
    try:
        assert produce_to_leader(client, produce_request("route", 0, [b"a", b"b"])) == ErrorCode.NONE
        # Metadata reports leader epoch 0 for a new partition; an older one is fenced,
        # a newer one unknown, the current one served.
        current = client.call(ApiKey.FETCH, 11, fetch_request("route", 0, 0, epoch=0))
        assert current.responses[0].partitions[0].error_code == ErrorCode.NONE
        ahead = client.call(ApiKey.FETCH, 11, fetch_request("route", 0, 0, epoch=5))
        assert ahead.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
        latest = client.call(ApiKey.LIST_OFFSETS, 4, list_offsets_request("route", 0)).topics[0].partitions[0]
        assert (latest.error_code, latest.offset, latest.leader_epoch) == (ErrorCode.NONE, 2, 0)
    finally:
        client.close()


def test_acks_all_waits_for_the_isr_and_consumers_see_only_committed(cluster):
    create(cluster, "repl", partitions=1, rf=3)
    leader = cluster.partition("repl", 0).leader
    followers = [n for n in (1, 2, 3) if n != leader]
    client = BlockingClient(cluster.brokers[leader].port)
    try:
        assert produce_to_leader(client, produce_request("repl", 0, [b"one", b"two"])) == ErrorCode.NONE
        # Both followers fetched the batch before acks=all was answered: the high
        # watermark covers it.
        fetched = client.call(ApiKey.FETCH, 11, fetch_request("repl", 0, 0))
        assert fetched.responses[0].partitions[0].high_watermark == 2
        # One follower paused: the ISR shrinks after replica.lag.time.max.ms (5 s) and
        # acks=all goes on with 2 of 3 (min.insync.replicas=2).
        cluster.pause(followers[0])
        try:
            wait_until(lambda: len(cluster.partition("repl", 0).isrs) == 2, 30, "the ISR to shrink")
            acked = client.call(ApiKey.PRODUCE, 7, produce_request("repl", 0, [b"three"]))
            assert acked.responses[0].partition_responses[0].error_code == ErrorCode.NONE
            # Both other followers paused too: fewer in sync than min.insync.replicas.
            cluster.pause(followers[1])
            try:
                wait_until(lambda: len(cluster.partition("repl", 0).isrs) == 1, 30,
                           "the ISR to shrink to the leader")
                refused = client.call(ApiKey.PRODUCE, 7, produce_request("repl", 0, [b"four"]))
                assert refused.responses[0].partition_responses[0].error_code == \
                    ErrorCode.NOT_ENOUGH_REPLICAS
            finally:
                cluster.resume(followers[1])
        finally:
            cluster.resume(followers[0])
        # Resumed followers catch up and join the ISR again.
        wait_until(lambda: len(cluster.partition("repl", 0).isrs) == 3, 30, "the ISR to grow back")
    finally:
        client.close()
    assert [v for _, v in consume_all(cluster.bootstrap, "repl", 3)] == [b"one", b"two", b"three"]


def test_leader_kill9_loses_no_acknowledged_record(cluster):
    create(cluster, "failover", partitions=1, rf=3)
    old = cluster.partition("failover", 0)
    acked: list[bytes] = []
    failed: list[str] = []

    def delivered(err, message):
        if err is None:
            acked.append(message.value())
        else:
            failed.append(str(err))

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5,
                         "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 1000})
    total = 400
    for i in range(total):
        producer.produce("failover", value=f"r{i:05d}".encode(), partition=0, on_delivery=delivered)
        producer.poll(0)
        if i == total // 2:
            producer.flush(30)
            assert len(acked) == i + 1
            cluster.brokers[old.leader].kill9()
        time.sleep(0.002)
    assert producer.flush(90) == 0, "records still undelivered"
    assert not failed, failed[:5]
    new = wait_until(lambda: (p := cluster.partition("failover", 0)) is not None
                     and p.leader not in (-1, old.leader) and p, 30, "a new leader")
    assert new.leader in old.isrs
    records = consume_all(cluster.bootstrap, "failover", len(acked))
    offsets = [offset for offset, _ in records]
    assert offsets == list(range(len(records)))  # dense
    values = [value for _, value in records]
    assert sorted(values) == sorted(acked) and len(set(values)) == len(values)  # exactly once
    assert values == sorted(values)  # in order
    # The old epoch is fenced on the new leader.
    client = BlockingClient(cluster.brokers[new.leader].port)
    try:
        stale = client.call(ApiKey.FETCH, 11, fetch_request("failover", 0, 0, epoch=0))
        assert stale.responses[0].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH
    finally:
        client.close()


def test_paused_leader_acknowledges_nothing_and_rejoins_as_follower(cluster):
    create(cluster, "paused", partitions=1, rf=3)
    old = cluster.partition("paused", 0)
    client = BlockingClient(cluster.brokers[old.leader].port)
    try:
        assert produce_to_leader(client, produce_request("paused", 0, [b"a"])) == ErrorCode.NONE
        cluster.pause(old.leader)
        # Sent while it is stopped: read when it resumes, after another broker took over.
        client.send(ApiKey.PRODUCE, 7, produce_request("paused", 0, [b"lost"], timeout_ms=3000))
        new = wait_until(lambda: (p := cluster.partition("paused", 0)) is not None
                         and p.leader not in (-1, old.leader) and p, 30, "a new leader")
        other = BlockingClient(cluster.brokers[new.leader].port)
        try:
            assert produce_to_leader(other, produce_request("paused", 0, [b"b"])) == ErrorCode.NONE
        finally:
            other.close()
        cluster.resume(old.leader)
        answer = client.recv()
        assert answer.responses[0].partition_responses[0].error_code != ErrorCode.NONE
    finally:
        client.close()
    # It registers again, truncates what it alone had, and catches up into the ISR.
    cluster.wait_for_brokers({1, 2, 3})
    wait_until(lambda: len(cluster.partition("paused", 0).isrs) == 3, 30, "the old leader in the ISR")
    assert [v for _, v in consume_all(cluster.bootstrap, "paused", 2)] == [b"a", b"b"]
    # Every replica holds the same bytes.
    logs = {n: b"".join(f.read_bytes() for f in b.segment_files("paused", 0))
            for n, b in cluster.brokers.items()}
    assert len(set(logs.values())) == 1, {n: len(v) for n, v in logs.items()}
    # Each batch carries the epoch of the leader that appended it.
    epochs = [h.partition_leader_epoch for _, h in iter_batches(logs[1])]
    assert epochs[0] == 0 and epochs[-1] >= 1 and epochs == sorted(epochs), epochs


def test_repeated_leader_kills_lose_and_duplicate_nothing(cluster):
    topics = {"confluent-kafka": "kills-ck", "kafka-python": "kills-kp"}
    for topic in topics.values():
        create(cluster, topic, partitions=1, rf=3)
    cycles = int(os.environ.get("CLUSTER_KILL_CYCLES", "3"))
    producers = [ContinuousProducer(kind, cluster.bootstrap, topic) for kind, topic in topics.items()]
    with producers[0], producers[1]:
        for cycle in range(cycles):
            topic = list(topics.values())[cycle % 2]
            wait_for_progress(producers)
            leader = cluster.partition(topic, 0).leader
            cluster.brokers[leader].kill9()
            _wait_for_new_leader(cluster, topic, leader)
            cluster.brokers[leader].start()
            wait_until(lambda: all(len(cluster.partition(t, 0).isrs) == 3 for t in topics.values()),
                       60, "the restarted broker back in every ISR")
        wait_for_progress(producers)
    for producer in producers:
        assert not producer.failed, (producer.kind, producer.failed[:5])
        records = consume_all(cluster.bootstrap, producer.topic, len(producer.acked), timeout=60)
        values = [value for _, value in records]
        assert [offset for offset, _ in records] == list(range(len(records)))  # dense
        assert len(set(values)) == len(values), f"{producer.kind}: duplicates"
        assert set(producer.acked) <= set(values), f"{producer.kind}: acknowledged records lost"
        assert values == sorted(values), f"{producer.kind}: order"
    # Quiesced and all in sync: every replica holds the same bytes.
    for topic in topics.values():
        wait_until(lambda t=topic: len({log_bytes(b, t) for b in cluster.brokers.values()}) == 1,
                   30, f"identical replicas of {topic}")


def _wait_for_new_leader(cluster: Cluster, topic: str, old: int, index: int = 0) -> None:
    wait_until(lambda: (p := cluster.partition(topic, index)) is not None
               and p.leader not in (-1, old), 30, f"a new leader of {topic}-{index}")


def test_producer_ids_are_unique_across_brokers(cluster):
    """Every broker hands out ids from its own block reserved in etcd: no two producers
    get one id, whichever broker they ask."""
    seen = []
    for node, broker in cluster.brokers.items():
        client = BlockingClient(broker.port)
        try:
            for _ in range(3):
                answer = client.call(ApiKey.INIT_PRODUCER_ID, 1, InitProducerIdRequest(
                    transactional_id=None, transaction_timeout_ms=60000))
                assert answer.error_code == ErrorCode.NONE and answer.producer_epoch == 0
                seen.append((node, answer.producer_id))
        finally:
            client.close()
    ids = [pid for _, pid in seen]
    assert len(set(ids)) == len(ids), seen
    # One block per broker, consecutive ids inside each.
    for node in cluster.brokers:
        mine = [pid for n, pid in seen if n == node]
        assert mine == list(range(mine[0], mine[0] + 3)) and mine[0] % 1000 == 0, seen


def test_brokers_serve_through_a_short_etcd_outage_and_step_down_past_the_session(cluster, etcd):
    create(cluster, "etcd-down", partitions=1, rf=3)
    leader = cluster.partition("etcd-down", 0).leader
    client = BlockingClient(cluster.brokers[leader].port)

    def produce() -> int:
        answer = client.call(ApiKey.PRODUCE, 7, produce_request("etcd-down", 0, [b"during"]))
        return int(answer.responses[0].partition_responses[0].error_code)
    try:
        assert produce_to_leader(client, produce_request("etcd-down", 0, [b"before"])) == ErrorCode.NONE
        etcd.stop()
        # For a second without etcd (well within the 3 s session timeout, counted from
        # the last lease renewal): the last known leadership and ISR hold, acks=all
        # writes go on.
        written = 0
        deadline = time.monotonic() + 1
        while time.monotonic() < deadline:
            assert produce() == ErrorCode.NONE
            written += 1
        # Past the session timeout without a renewal, etcd may have expired the
        # leader's session and another broker may lead: it stops acknowledging.
        outcomes = []
        wait_until(lambda: outcomes.append(produce()) or outcomes[-1] != ErrorCode.NONE, 10,
                   "the leader to step down without its session")
        written += len(outcomes) - 1
        if outcomes[-1] == ErrorCode.REQUEST_TIMED_OUT:
            # That write was appended and waiting for the ISR when the leader stepped
            # down: "possibly persisted" (routing.STOPPED_LEADING); the next is refused.
            outcomes.append(produce())
        assert outcomes[-1] == ErrorCode.NOT_LEADER_OR_FOLLOWER, outcomes[-1]
        etcd.start()
    finally:
        client.close()
    # etcd is back: sessions, watches and the controller carry on, and every
    # acknowledged write is there.
    cluster.wait_for_brokers({1, 2, 3})
    wait_until(lambda: len(cluster.partition("etcd-down", 0).isrs) == 3, 60, "the ISR whole again")
    create(cluster, "etcd-back", partitions=1, rf=3)
    assert len(consume_all(cluster.bootstrap, "etcd-down", 1 + written)) == 1 + written


def test_topic_deletion_goes_through_etcd_to_every_broker(cluster):
    create(cluster, "doomed", partitions=2, rf=3)
    # A partition's directory is made by its first append (partitions are made lazily):
    # a record in each, acknowledged by all replicas, puts one on every broker.
    produce_partitions(cluster.bootstrap, "doomed", [(0, b"a"), (1, b"b")])
    assert all(b.partition_dir("doomed", p).is_dir()
               for b in cluster.brokers.values() for p in (0, 1))
    admin = cluster.admin()
    admin.delete_topics(["doomed"])["doomed"].result(timeout=20)
    wait_until(lambda: "doomed" not in cluster.metadata().topics, 20, "the topic to disappear")
    wait_until(lambda: not any(b.partition_dir("doomed", p).exists()
                               for b in cluster.brokers.values() for p in (0, 1)),
               30, "every broker to delete its replicas")
    with pytest.raises(Exception, match="UNKNOWN_TOPIC_OR_PART"):
        admin.delete_topics(["doomed"])["doomed"].result(timeout=20)
    create(cluster, "doomed", partitions=1, rf=3)  # the name can be used again


def test_one_coordinator_for_a_group_whichever_broker_its_members_ask(cluster):
    create(cluster, "grouped", partitions=2, rf=3)
    consumers = [Consumer({"bootstrap.servers": cluster.brokers[node].bootstrap,
                           "group.id": "split-check", "session.timeout.ms": 6000,
                           "auto.offset.reset": "earliest"}) for node in (1, 2)]
    try:
        for consumer in consumers:
            consumer.subscribe(["grouped"])

        def balanced() -> bool:
            for consumer in consumers:
                consumer.poll(0.1)
            return all(len(c.assignment()) == 1 for c in consumers)

        wait_until(balanced, 60, "the two members to share the two partitions")
        owned = {p.partition for c in consumers for p in c.assignment()}
        assert owned == {0, 1}  # split between them, not each taking both
    finally:
        for consumer in consumers:
            consumer.close()


def test_rolling_restart_under_producers_loses_nothing(cluster):
    """Each broker in turn stopped cleanly (SIGTERM: it leaves the cluster at once, its
    leaderships move) and started again, while two idempotent acks=all producers write."""
    topics = {"confluent-kafka": "rolling-ck", "kafka-python": "rolling-kp"}
    for topic in topics.values():
        create(cluster, topic, partitions=1, rf=3)
    producers = [ContinuousProducer(kind, cluster.bootstrap, topic) for kind, topic in topics.items()]
    with producers[0], producers[1]:
        for node, broker in cluster.brokers.items():
            wait_for_progress(producers)
            assert broker.stop() == 0
            cluster.wait_for_brokers(set(cluster.brokers) - {node})
            broker.start()
            wait_until(lambda: all(len(cluster.partition(t, 0).isrs) == 3 for t in topics.values()),
                       60, f"broker {node} back in every ISR")
        wait_for_progress(producers)
    for producer in producers:  # the unavailability each saw (controlled shutdown), shown
        times = producer.ack_times
        print(f"{producer.kind}: longest pause between acknowledgements over the rolling "
              f"restart {max(b - a for a, b in zip(times, times[1:], strict=False)) * 1000:.0f} ms")
    for producer in producers:
        assert not producer.failed, (producer.kind, producer.failed[:5])
        records = consume_all(cluster.bootstrap, producer.topic, len(producer.acked), timeout=60)
        values = [value for _, value in records]
        assert [offset for offset, _ in records] == list(range(len(records)))
        assert len(set(values)) == len(values) and set(producer.acked) <= set(values)
        assert values == sorted(values)


def test_committed_offsets_survive_the_coordinator_kill9(cluster):
    """The coordinator is the leader of the replicated __consumer_offsets and answers a
    commit once the ISR has it: killed right after, the new leader replays the log and
    answers with the group's committed offsets."""
    create(cluster, "gdata", partitions=1, rf=3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce("gdata", value=b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "survivors",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["gdata"])
        seen = []
        wait_until(lambda: (m := consumer.poll(0.2)) is not None and m.error() is None
                   and seen.append(m.offset()) is None and len(seen) == 10, 60, "ten records")
        consumer.commit(offsets=[TopicPartition("gdata", 0, 7)], asynchronous=False)
    finally:
        consumer.close()
    # The group's partition of __consumer_offsets (50 of them, placed as Kafka does).
    where = kafka_partition_for("survivors", 50)
    coordinator = cluster.partition("__consumer_offsets", where).leader
    # At once: an acknowledged commit is already on every in-sync replica.
    cluster.brokers[coordinator].kill9()
    _wait_for_new_leader(cluster, "__consumer_offsets", coordinator, where)
    survivor = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "survivors",
                         "enable.auto.commit": False})
    try:
        committed = wait_until(
            lambda: _committed(survivor, "gdata"), 60, "the committed offset from the new coordinator")
        assert committed == 7
    finally:
        survivor.close()


def _committed(consumer: Consumer, topic: str) -> int | None:
    try:
        found = consumer.committed([TopicPartition(topic, 0)], timeout=5)
    except Exception:  # the coordinator is moving: ask again
        return None
    return found[0].offset if found[0].offset >= 0 else None


def test_transactional_batch_without_transactional_id_is_refused_whole(cluster):
    """As Kafka (KafkaApis.handleProduceRequest): TRANSACTIONAL_ID_AUTHORIZATION_FAILED on
    every partition of the request, nothing appended, also in cluster mode."""
    create(cluster, "txn-less", partitions=1, rf=3)
    part = cluster.partition("txn-less", 0)
    client = BlockingClient(cluster.brokers[part.leader].port)
    try:
        request = produce_request("txn-less", 0, [b"t"])
        request.topic_data[0].partition_data[0].records = record_batch(
            [(None, b"t")], producer_id=7, producer_epoch=0, base_sequence=0,
            attributes=0x10)  # the transactional bit
        response = client.call(ApiKey.PRODUCE, 7, request)
        refused = response.responses[0].partition_responses[0]
        assert (refused.error_code, refused.base_offset) == (
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)
        assert produce_to_leader(client, produce_request("txn-less", 0, [b"plain"])) == ErrorCode.NONE
        latest = client.call(ApiKey.LIST_OFFSETS, 4, list_offsets_request("txn-less", 0))
        assert latest.topics[0].partitions[0].offset == 1  # only the plain record
    finally:
        client.close()
