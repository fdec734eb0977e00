"""kafka-python 3.0 against a real logserver: idempotent producer with its defaults,
consumer with assign/seek, auto_offset_reset earliest/latest, offsets_for_times,
beginning_offsets/end_offsets."""

from __future__ import annotations

import time

import pytest
from helpers.clienthelpers import create_topic, kp_consumer, kp_produce, kp_producer, kp_read

pytestmark = pytest.mark.timeout(120)


def test_producer_defaults_are_idempotent(module_server, topic_name):
    """kafka-python 3.x turns idempotence on by default unless it infers an old broker
    (then it logs a warning and turns it off): the server's ApiVersions must make it
    infer >= 0.11, and InitProducerId must hand out a producer id."""
    producer = kp_producer(module_server.bootstrap)
    try:
        assert producer.config["enable_idempotence"] is True
        assert producer.config["api_version"] >= (0, 11), producer.config["api_version"]
        md = producer.send(topic_name, key=b"k", value=b"v").get(timeout=30)
        assert md.offset == 0
        tm = producer._transaction_manager
        assert tm is not None
        pid = tm.producer_id_and_epoch
        assert pid.producer_id >= 0 and pid.epoch >= 0, pid
    finally:
        producer.close(timeout=10)


def test_produce_then_consume_assign_seek(module_server, topic_name):
    create_topic(module_server.bootstrap, topic_name, partitions=3)
    items = [{"key": f"k{i % 7}".encode(), "value": f"value-{i}".encode(),
              "headers": [("n", str(i).encode())]} for i in range(300)]
    written = kp_produce(module_server.bootstrap, topic_name, items)
    assert sorted({r.partition for r in written}) == [0, 1, 2]
    # per partition, offsets are 0..n-1 in send order
    for p in range(3):
        offs = [r.offset for r in written if r.partition == p]
        assert offs == list(range(len(offs)))

    read = kp_read(module_server.bootstrap, topic_name)
    assert sorted(read) == sorted(written)

    # seek into the middle of partition 0
    p0 = [r for r in written if r.partition == 0]
    mid = len(p0) // 2
    again = kp_read(module_server.bootstrap, topic_name, start={0: mid, 1: 10**9, 2: 10**9},
                    end={0: len(p0), 1: 0, 2: 0})
    assert [r.offset for r in again] == list(range(mid, len(p0)))
    assert [r.value for r in again] == [r.value for r in p0[mid:]]


def test_auto_offset_reset_earliest(module_server, topic_name):
    from kafka import TopicPartition

    create_topic(module_server.bootstrap, topic_name, partitions=1)
    kp_produce(module_server.bootstrap, topic_name,
               [{"value": f"e{i}".encode()} for i in range(5)])
    consumer = kp_consumer(module_server.bootstrap, auto_offset_reset="earliest")
    try:
        tp = TopicPartition(topic_name, 0)
        consumer.assign([tp])  # no seek: the reset policy decides
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            for msgs in consumer.poll(timeout_ms=500).values():
                got += [m.value for m in msgs]
        assert got == [f"e{i}".encode() for i in range(5)]
    finally:
        consumer.close()


def test_auto_offset_reset_latest(module_server, topic_name):
    from kafka import TopicPartition

    create_topic(module_server.bootstrap, topic_name, partitions=1)
    kp_produce(module_server.bootstrap, topic_name,
               [{"value": f"old{i}".encode()} for i in range(5)])
    consumer = kp_consumer(module_server.bootstrap, auto_offset_reset="latest")
    try:
        tp = TopicPartition(topic_name, 0)
        consumer.assign([tp])
        assert consumer.position(tp) == 5  # resolved through ListOffsets latest
        kp_produce(module_server.bootstrap, topic_name,
                   [{"value": f"new{i}".encode()} for i in range(3)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            for msgs in consumer.poll(timeout_ms=500).values():
                got += [(m.offset, m.value) for m in msgs]
        assert got == [(5 + i, f"new{i}".encode()) for i in range(3)]
    finally:
        consumer.close()


def test_offsets_for_times_and_beginning_end(module_server, topic_name):
    from kafka import TopicPartition

    create_topic(module_server.bootstrap, topic_name, partitions=2)
    base = int(time.time() * 1000) - 3_600_000
    items = [{"value": f"t{i}".encode(), "timestamp_ms": base + i * 1000, "partition": 0}
             for i in range(10)]
    written = kp_produce(module_server.bootstrap, topic_name, items)
    assert [r.timestamp for r in written] == [base + i * 1000 for i in range(10)]

    consumer = kp_consumer(module_server.bootstrap)
    try:
        tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
        assert consumer.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        assert consumer.end_offsets([tp0, tp1]) == {tp0: 10, tp1: 0}

        res = consumer.offsets_for_times({tp0: base + 2500})
        assert res[tp0].offset == 3 and res[tp0].timestamp == base + 3000
        res = consumer.offsets_for_times({tp0: base})  # exact hit
        assert res[tp0].offset == 0 and res[tp0].timestamp == base
        res = consumer.offsets_for_times({tp0: 0})  # before everything: first record
        assert res[tp0].offset == 0
        res = consumer.offsets_for_times({tp0: base + 10 * 1000})  # after everything
        assert res[tp0] is None
        res = consumer.offsets_for_times({tp1: base})  # empty partition
        assert res[tp1] is None

        # seek to the offset found by time and read from there
        consumer.assign([tp0])
        consumer.seek(tp0, consumer.offsets_for_times({tp0: base + 7000})[tp0].offset)
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            for msgs in consumer.poll(timeout_ms=500).values():
                got += [m.value for m in msgs]
        assert got == [b"t7", b"t8", b"t9"]
    finally:
        consumer.close()


def test_seek_to_beginning_and_end(module_server, topic_name):
    from kafka import TopicPartition

    create_topic(module_server.bootstrap, topic_name, partitions=1)
    kp_produce(module_server.bootstrap, topic_name, [{"value": b"a"}, {"value": b"b"}])
    consumer = kp_consumer(module_server.bootstrap)
    try:
        tp = TopicPartition(topic_name, 0)
        consumer.assign([tp])
        consumer.seek_to_end(tp)
        assert consumer.position(tp) == 2
        consumer.seek_to_beginning(tp)
        assert consumer.position(tp) == 0
    finally:
        consumer.close()


def test_acks_variants(module_server, topic_name):
    """acks=1 and acks=0 (no response at all from the broker) both land records."""
    create_topic(module_server.bootstrap, topic_name, partitions=1)
    kp_produce(module_server.bootstrap, topic_name, [{"value": b"one"}],
               producer_config={"acks": 1, "enable_idempotence": False})
    producer = kp_producer(module_server.bootstrap, acks=0, enable_idempotence=False)
    try:
        for i in range(3):
            producer.send(topic_name, value=f"zero{i}".encode())
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)
    deadline = time.monotonic() + 15
    while True:
        recs = kp_read(module_server.bootstrap, topic_name)
        if len(recs) >= 4 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert [r.value for r in recs] == [b"one", b"zero0", b"zero1", b"zero2"]


def test_long_poll_fetch_woken_by_append(module_server, topic_name):
    """A consumer waiting at the log end gets a new record quickly (not after
    fetch_max_wait_ms): the delayed fetch is woken by the append."""
    from kafka import TopicPartition

    create_topic(module_server.bootstrap, topic_name, partitions=1)
    # A parked fetch waits up to 30 s: the record must come well before that, so only a
    # wake-up by the append delivers it within the 25 s this test waits.
    consumer = kp_consumer(module_server.bootstrap, fetch_max_wait_ms=30000,
                           request_timeout_ms=60000, auto_offset_reset="latest")
    producer = kp_producer(module_server.bootstrap)
    try:
        tp = TopicPartition(topic_name, 0)
        consumer.assign([tp])
        assert consumer.position(tp) == 0
        consumer.poll(timeout_ms=200)  # a fetch is now parked on the server
        t0 = time.monotonic()
        producer.send(topic_name, value=b"wake").get(timeout=30)
        got = []
        while not got and time.monotonic() - t0 < 25:
            for msgs in consumer.poll(timeout_ms=200).values():
                got += msgs
        assert [m.value for m in got] == [b"wake"], "the parked fetch was not woken by the append"
    finally:
        producer.close(timeout=10)
        consumer.close()


def test_compression_codecs_kafka_python(module_server, topic_name):
    """kafka-python's gzip (always available) round trip; other codecs need extra
    python packages in kafka-python and are covered by confluent-kafka."""
    create_topic(module_server.bootstrap, topic_name, partitions=1)
    items = [{"value": (f"gz-{i}-" + "x" * 200).encode()} for i in range(50)]
    written = kp_produce(module_server.bootstrap, topic_name, items,
                         producer_config={"compression_type": "gzip"})
    read = kp_read(module_server.bootstrap, topic_name)
    assert [r.value for r in read] == [r.value for r in written]
