"""confluent-kafka (librdkafka) against a real logserver: producer with each compression
codec, consumer with assign() (a group.id is configured because the library requires
one, but no group API is used: no subscribe, no commits, no offset store)."""

from __future__ import annotations

import time

import pytest
from helpers.clienthelpers import ck_consumer, ck_produce, ck_read, create_topic, kp_read

pytestmark = pytest.mark.timeout(120)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.mark.parametrize("codec", CODECS)
def test_produce_codec_consume(module_server, topic_name, codec):
    create_topic(module_server.bootstrap, topic_name, partitions=3)
    base = int(time.time() * 1000) - 10_000
    items = [
        {
            "key": f"dev-{i % 13}".encode(),
            "value": (f"{codec}-{i}-" + "payload " * 20).encode(),
            "headers": [("codec", codec.encode()), ("seq", str(i).encode())],
            "timestamp_ms": base + i,
        }
        for i in range(500)
    ]
    written = ck_produce(module_server.bootstrap, topic_name, items,
                         **{"compression.type": codec, "linger.ms": 20,
                            "enable.idempotence": True, "acks": "all"})
    assert len(written) == 500
    end = {p: 1 + max((r.offset for r in written if r.partition == p), default=-1)
           for p in range(3)}
    read = ck_read(module_server.bootstrap, topic_name, range(3), end=end)
    assert sorted(read) == sorted(written)
    if codec in ("none", "gzip"):  # codecs kafka-python decodes without extra packages
        assert sorted(kp_read(module_server.bootstrap, topic_name)) == sorted(written)


def test_consumer_offsets_api(module_server, topic_name):
    """get_watermark_offsets / offsets_for_times / assign at an offset, no group use."""
    from confluent_kafka import TopicPartition

    create_topic(module_server.bootstrap, topic_name, partitions=1)
    base = int(time.time() * 1000) - 100_000
    items = [{"value": f"c{i}".encode(), "timestamp_ms": base + 1000 * i, "partition": 0}
             for i in range(10)]
    ck_produce(module_server.bootstrap, topic_name, items)

    consumer = ck_consumer(module_server.bootstrap)
    try:
        lo, hi = consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=15)
        assert (lo, hi) == (0, 10)
        (res,) = consumer.offsets_for_times([TopicPartition(topic_name, 0, base + 4500)],
                                            timeout=15)
        assert res.error is None and res.offset == 5
        (res,) = consumer.offsets_for_times([TopicPartition(topic_name, 0, base + 10**7)],
                                            timeout=15)
        assert res.offset in (-1, 10)  # "no such record": librdkafka reports END/-1
    finally:
        consumer.close()

    read = ck_read(module_server.bootstrap, topic_name, [0], start=7, end={0: 10})
    assert [(r.offset, r.value, r.timestamp) for r in read] == [
        (i, f"c{i}".encode(), base + 1000 * i) for i in range(7, 10)
    ]


def test_consumer_assign_only_reports_no_error(module_server, topic_name):
    """librdkafka with a group.id but only assign() (no subscribe, no commits): consuming
    works and no error is reported, whether or not the server serves group APIs."""
    from confluent_kafka import KafkaError, TopicPartition

    create_topic(module_server.bootstrap, topic_name, partitions=1)
    ck_produce(module_server.bootstrap, topic_name, [{"value": b"g", "partition": 0}])
    errors = []
    consumer = ck_consumer(module_server.bootstrap, error_cb=errors.append)
    try:
        consumer.assign([TopicPartition(topic_name, 0, 0)])
        got = []
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
            elif msg is not None and msg.error().code() != KafkaError._PARTITION_EOF:
                errors.append(msg.error())
        assert got == [b"g"]
        # No error may come later either: a second record, produced now and consumed, is
        # the witness that the consumer kept running (and reporting) after the first.
        ck_produce(module_server.bootstrap, topic_name, [{"value": b"g2", "partition": 0}])
        deadline = time.monotonic() + 20
        while got == [b"g"] and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
            elif msg is not None and msg.error().code() != KafkaError._PARTITION_EOF:
                errors.append(msg.error())
        assert got == [b"g", b"g2"]
    finally:
        consumer.close()
    fatal = [e for e in errors if getattr(e, "fatal", lambda: False)()]
    assert not fatal, errors
