"""Consumer groups with aiokafka, confluent-kafka (range and cooperative-sticky
assignors: the broker only relays their metadata) and Debian's kcat -G (librdkafka
2.0.2's balanced consumer), against a real logserver."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections import Counter

import pytest
from helpers.clienthelpers import create_topic, kp_producer
from helpers.serverproc import ServerProcess

pytestmark = pytest.mark.timeout(180)

GROUP_SETTINGS = {
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
    "num.partitions": 3,
}


@pytest.fixture(scope="module")
def srv(request, tmp_path_factory) -> ServerProcess:
    server = ServerProcess(tmp_path_factory.mktemp("groups-clients") / "data",
                           settings=GROUP_SETTINGS)
    request.addfinalizer(server.stop)
    server.start()
    return server


def produce(bootstrap: str, topic: str, prefix: str, count: int, partitions: int) -> list[str]:
    producer = kp_producer(bootstrap)
    try:
        values = [f"{prefix}-{i}" for i in range(count)]
        for i, value in enumerate(values):
            producer.send(topic, value=value.encode(), partition=i % partitions)
        producer.flush(timeout=30)
        return values
    finally:
        producer.close(timeout=10)


# ------------------------------------------------------------------------ aiokafka
def test_aiokafka_group_consumer_commits_and_resumes(srv, topic_name):
    from aiokafka import AIOKafkaConsumer, TopicPartition

    create_topic(srv.bootstrap, topic_name, partitions=3)
    first = produce(srv.bootstrap, topic_name, "a", 90, 3)
    group = f"g-{topic_name}"

    async def consume(expected: int) -> tuple[list[str], dict[int, int]]:
        consumer = AIOKafkaConsumer(topic_name, bootstrap_servers=srv.bootstrap, group_id=group,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    session_timeout_ms=6000, heartbeat_interval_ms=1000)
        await consumer.start()
        try:
            got: list[str] = []
            deadline = time.monotonic() + 30
            while len(got) < expected and time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=300)
                got += [m.value.decode() for ms in batch.values() for m in ms]
            await consumer.commit()
            assert consumer.assignment() == {TopicPartition(topic_name, p) for p in range(3)}
            committed = {p: await consumer.committed(TopicPartition(topic_name, p))
                         for p in range(3)}
            return got, committed
        finally:
            await consumer.stop()

    got, committed = asyncio.run(consume(90))
    assert sorted(got) == sorted(first)
    assert committed == {0: 30, 1: 30, 2: 30}
    second = produce(srv.bootstrap, topic_name, "b", 30, 3)
    got, committed = asyncio.run(consume(30))
    assert sorted(got) == sorted(second)  # resumed from the committed offsets
    assert committed == {0: 40, 1: 40, 2: 40}


# ------------------------------------------------------------------------ confluent-kafka
@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_confluent_consumers_share_partitions(srv, topic_name, strategy):
    from confluent_kafka import Consumer

    create_topic(srv.bootstrap, topic_name, partitions=4)
    group = f"g-{topic_name}"
    consumers = [Consumer({
        "bootstrap.servers": srv.bootstrap, "group.id": group,
        "auto.offset.reset": "earliest", "partition.assignment.strategy": strategy,
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
        "enable.auto.commit": False, "client.id": f"{strategy}-{i}"}) for i in range(2)]
    got: list[list[tuple[int, str]]] = [[], []]

    def poll_all() -> None:
        for i, consumer in enumerate(consumers):
            message = consumer.poll(0.05)
            if message is not None and message.error() is None:
                got[i].append((message.partition(), message.value().decode()))
                consumer.commit(message=message, asynchronous=False)

    try:
        for consumer in consumers:
            consumer.subscribe([topic_name])
        deadline = time.monotonic() + 60
        while True:  # both members hold partitions, all 4 are taken
            poll_all()
            held = [sorted(tp.partition for tp in c.assignment()) for c in consumers]
            if all(held) and sorted(sum(held, [])) == [0, 1, 2, 3]:
                break
            assert time.monotonic() < deadline, held
        values = produce(srv.bootstrap, topic_name, strategy, 200, 4)
        deadline = time.monotonic() + 60
        while sum(len(g) for g in got) < 200 and time.monotonic() < deadline:
            poll_all()
        counts = Counter(v for g in got for _, v in g)
        assert sorted(counts) == sorted(values)
        assert set(counts.values()) == {1}  # exactly once across the group
        for i, consumer in enumerate(consumers):  # each from its own partitions
            mine = {tp.partition for tp in consumer.assignment()}
            assert {p for p, _ in got[i]} <= mine
    finally:
        for consumer in consumers:
            consumer.close()


# ------------------------------------------------------------------------ kcat -G
@pytest.mark.kcat
def test_kcat_balanced_consumer(srv, topic_name, kcat_bin):
    create_topic(srv.bootstrap, topic_name, partitions=3)
    values = produce(srv.bootstrap, topic_name, "k", 60, 3)
    group = f"g-{topic_name}"

    def run_kcat() -> list[str]:
        result = subprocess.run(
            [kcat_bin, "-b", srv.bootstrap, "-G", group, "-X", "auto.offset.reset=earliest",
             "-e", "-q", "-f", "%p %o %s\\n", topic_name],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert result.returncode == 0, result.stderr
        return [line.split(" ", 2)[2] for line in result.stdout.splitlines() if line]

    assert sorted(run_kcat()) == sorted(values)
    # librdkafka committed on close: the group resumes after what it read
    more = produce(srv.bootstrap, topic_name, "m", 9, 3)
    assert sorted(run_kcat()) == sorted(more)
