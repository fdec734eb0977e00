"""Transactions (KIP-98) with confluent-kafka (librdkafka) against a real server:
commit and abort, read_committed vs read_uncommitted consumers, ListOffsets at the LSO,
zombie fencing, exactly-once consume-transform-produce with send_offsets_to_transaction.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from helpers.txn_clients import DEADLINE_S, consume_all, create_topics, txn_producer


def test_commit_and_abort_read_committed_vs_uncommitted(server, topic_name):
    create_topics(server, topic_name)
    producer = txn_producer(server, f"tx-{topic_name}")
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic_name, key=str(i).encode(), value=f"c1-{i}".encode())
    producer.commit_transaction(15)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic_name, key=str(i).encode(), value=f"a-{i}".encode())
    producer.flush(10)
    producer.abort_transaction(15)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic_name, key=str(i).encode(), value=f"c2-{i}".encode())
    producer.commit_transaction(15)

    committed = consume_all(server, topic_name, "read_committed", expected=15)
    assert sorted(committed) == sorted([f"c1-{i}".encode() for i in range(10)]
                                       + [f"c2-{i}".encode() for i in range(5)])
    # no aborted record shows up after the committed ones either
    again = consume_all(server, topic_name, "read_committed")
    assert not [v for v in again if v.startswith(b"a-")]
    assert len(again) == 15
    uncommitted = consume_all(server, topic_name, "read_uncommitted", expected=25)
    assert len([v for v in uncommitted if v.startswith(b"a-")]) == 10


def test_open_transaction_holds_back_read_committed_and_lso(server, topic_name):
    create_topics(server, topic_name, partitions=1)
    plain = Producer({"bootstrap.servers": server.bootstrap})
    plain.produce(topic_name, value=b"before")
    plain.flush(10)
    producer = txn_producer(server, f"tx-{topic_name}")
    producer.begin_transaction()
    producer.produce(topic_name, value=b"open")
    producer.flush(10)
    plain.produce(topic_name, value=b"after")  # non-transactional, behind the open txn
    plain.flush(10)

    def watermarks(isolation: str) -> tuple[int, int]:
        consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "wm",
                             "isolation.level": isolation})
        try:
            return consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10, cached=False)
        finally:
            consumer.close()

    # ListOffsets latest: the LSO (1, the open txn's first offset) for read_committed
    assert watermarks("read_committed") == (0, 1)
    assert watermarks("read_uncommitted") == (0, 3)
    seen = consume_all(server, topic_name, "read_committed")
    assert seen == [b"before"]
    producer.commit_transaction(15)
    assert consume_all(server, topic_name, "read_committed", expected=3) == [b"before", b"open", b"after"]
    assert watermarks("read_committed") == (0, 4)  # the commit marker takes an offset


def test_zombie_is_fenced(server, topic_name):
    create_topics(server, topic_name, partitions=1)
    txn_id = f"tx-{topic_name}"
    zombie = txn_producer(server, txn_id)
    zombie.begin_transaction()
    zombie.produce(topic_name, value=b"zombie")
    zombie.flush(10)
    successor = txn_producer(server, txn_id)  # bumps the epoch: the zombie's txn is aborted
    successor.begin_transaction()
    successor.produce(topic_name, value=b"successor")
    successor.commit_transaction(15)
    with pytest.raises(KafkaException) as info:
        zombie.produce(topic_name, value=b"zombie-2")
        zombie.commit_transaction(15)
    error = info.value.args[0]
    assert error.fatal() or error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                              KafkaError.INVALID_PRODUCER_EPOCH), error
    assert consume_all(server, topic_name, "read_committed") == [b"successor"]


def test_exactly_once_consume_transform_produce(server, topic_name):
    source, sink, group = f"{topic_name}-in", f"{topic_name}-out", f"g-{topic_name}"
    create_topics(server, source, sink)
    plain = Producer({"bootstrap.servers": server.bootstrap})
    inputs = [f"{i}".encode() for i in range(200)]
    for value in inputs:
        plain.produce(source, key=value, value=value)
    plain.flush(10)

    def run(stop_after: int | None, abort_last: bool) -> int:
        """Transform up to ``stop_after`` records in transactions of 20; ``abort_last``
        aborts the final batch (a crash before commit, as far as the output is concerned)."""
        consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "isolation.level": "read_committed"})
        consumer.subscribe([source])
        producer = txn_producer(server, f"eos-{topic_name}")
        done = 0
        deadline = time.monotonic() + DEADLINE_S
        try:
            while time.monotonic() < deadline and (stop_after is None or done < stop_after):
                msgs = consumer.consume(20, 1.0)
                msgs = [m for m in msgs if not m.error()]
                if not msgs:
                    if stop_after is None and done and _lag(consumer) == 0:
                        break
                    continue
                producer.begin_transaction()
                for m in msgs:
                    producer.produce(sink, key=m.key(), value=b"out-" + m.value())
                producer.send_offsets_to_transaction(
                    consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 15)
                last = stop_after is not None and done + len(msgs) >= stop_after
                if last and abort_last:
                    producer.abort_transaction(15)
                    break
                producer.commit_transaction(15)
                done += len(msgs)
        finally:
            consumer.close()
        return done

    def _lag(consumer: Consumer) -> int:
        lag = 0
        for tp in consumer.assignment():
            _, high = consumer.get_watermark_offsets(tp, timeout=5, cached=False)
            position = consumer.position([tp])[0].offset
            lag += max(0, high - max(position, 0))
        return lag

    run(stop_after=60, abort_last=True)  # its last transaction is aborted
    run(stop_after=None, abort_last=False)  # resumes from the committed offsets
    out = consume_all(server, sink, "read_committed", expected=len(inputs))
    assert sorted(out) == sorted(b"out-" + v for v in inputs)
    assert len(set(out)) == len(out)


def test_offsets_visible_only_when_the_transaction_commits(server, topic_name):
    from helpers.kafkaclient import BlockingClient

    from kafkaproto import ApiKey, ErrorCode
    from kafkaproto.messages import OffsetFetchRequest

    source, sink, group = f"{topic_name}-in", f"{topic_name}-out", f"g-{topic_name}"
    create_topics(server, source, sink, partitions=1)
    member = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group})
    metadata = member.consumer_group_metadata()
    conn = BlockingClient(server.port, "offsets-check", timeout=10)

    def committed(require_stable: bool) -> tuple[int, int]:
        response = conn.call(ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(
            group_id=group, require_stable=require_stable, topics=[
                OffsetFetchRequest.OffsetFetchRequestTopic(name=source, partition_indexes=[0])]))
        partition = response.topics[0].partitions[0]
        return partition.committed_offset, partition.error_code

    producer = txn_producer(server, f"tx-{topic_name}")
    try:
        producer.begin_transaction()
        producer.produce(sink, value=b"x")
        producer.send_offsets_to_transaction([TopicPartition(source, 0, 5)], metadata, 15)
        assert committed(False) == (-1, ErrorCode.NONE)  # not visible before the commit
        assert committed(True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)  # KIP-447
        producer.commit_transaction(15)
        assert committed(True) == (5, ErrorCode.NONE)
        producer.begin_transaction()
        producer.produce(sink, value=b"y")
        producer.send_offsets_to_transaction([TopicPartition(source, 0, 9)], metadata, 15)
        producer.abort_transaction(15)
        assert committed(True) == (5, ErrorCode.NONE)  # an aborted transaction's offsets vanish
    finally:
        conn.close()
        member.close()
