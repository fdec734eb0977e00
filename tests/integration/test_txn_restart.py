"""Transactions across a server kill -9 and across an abandoned producer, with
confluent-kafka: nothing of an unfinished transaction ever becomes visible to a
read_committed consumer, and consumers move past it once it is aborted."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from helpers.txn_clients import consume_all, create_topics, txn_producer

SWEEP = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 200}


def _wait_for(condition, timeout_s: float = 30.0, what: str = "condition"):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
    raise AssertionError(f"timed out waiting for {what}")


def _stable_end(server, topic: str) -> int:
    """ListOffsets latest with read_committed: the last stable offset of partition 0."""
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "lso",
                         "isolation.level": "read_committed"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1]
    finally:
        consumer.close()


def test_kill9_mid_transaction_then_restart(server_factory, topic_name):
    server = server_factory(settings=SWEEP)
    create_topics(server, topic_name, partitions=2)
    txn_id = f"tx-{topic_name}"
    first = txn_producer(server, txn_id)
    first.begin_transaction()
    for i in range(6):
        first.produce(topic_name, key=str(i).encode(), value=f"committed-{i}".encode())
    first.commit_transaction(15)
    first.begin_transaction()
    for i in range(6):
        first.produce(topic_name, key=str(i).encode(), value=f"open-{i}".encode())
    first.flush(10)
    server.restart(clean=False)  # kill -9 with the transaction open
    del first
    # The successor's InitProducerId aborts the open transaction and fences its epoch.
    successor = txn_producer(server, txn_id)
    successor.begin_transaction()
    for i in range(3):
        successor.produce(topic_name, key=str(i).encode(), value=f"after-{i}".encode())
    successor.commit_transaction(15)
    values = consume_all(server, topic_name, "read_committed")
    assert sorted(values) == sorted([f"committed-{i}".encode() for i in range(6)]
                                    + [f"after-{i}".encode() for i in range(3)])
    assert len(consume_all(server, topic_name, "read_uncommitted", expected=15)) == 15


def test_kill9_mid_transaction_is_aborted_by_its_timeout_after_restart(server_factory, topic_name):
    server = server_factory(settings=SWEEP)
    create_topics(server, topic_name, partitions=1)
    producer = txn_producer(server, f"tx-{topic_name}", **{"transaction.timeout.ms": 3000})
    producer.begin_transaction()
    producer.produce(topic_name, value=b"open")
    producer.flush(10)
    server.restart(clean=False)
    del producer
    plain = Producer({"bootstrap.servers": server.bootstrap})
    plain.produce(topic_name, value=b"plain")
    plain.flush(10)
    # held back by the open transaction until its timeout aborts it, then readable
    assert _wait_for(lambda: consume_all(server, topic_name, "read_committed", quiet_s=0.5),
                     what="the timed-out transaction to be aborted") == [b"plain"]


def test_abandoned_transaction_is_aborted_by_its_timeout(server_factory, topic_name):
    server = server_factory(settings=SWEEP)
    create_topics(server, topic_name, partitions=1)
    vanished = txn_producer(server, f"tx-{topic_name}", **{"transaction.timeout.ms": 4000})
    vanished.begin_transaction()
    vanished.produce(topic_name, value=b"abandoned")
    vanished.flush(10)
    plain = Producer({"bootstrap.servers": server.bootstrap})
    plain.produce(topic_name, value=b"later")
    plain.flush(10)
    assert _stable_end(server, topic_name) == 0  # held back by the open transaction
    assert _wait_for(lambda: consume_all(server, topic_name, "read_committed", quiet_s=0.5),
                     what="the abandoned transaction to be aborted") == [b"later"]
    # the producer that vanished was fenced by the abort's epoch bump
    try:
        vanished.commit_transaction(10)
    except KafkaException as exc:
        assert not exc.args[0].retriable() or exc.args[0].txn_requires_abort() or exc.args[0].fatal()
    else:
        raise AssertionError("the abandoned transaction committed after its timeout")
    assert consume_all(server, topic_name, "read_committed", quiet_s=0.5) == [b"later"]
