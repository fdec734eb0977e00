"""Broker behaviours that real clients rely on, checked end to end against the server
process: responses in request order (pipelining), no response for acks=0, idempotent
producer duplicates and sequence gaps, KIP-74 (first batch whole), offset out of range,
message.max.bytes, auto topic creation honouring the request flag and the setting,
many partitions, concurrent producers, admin APIs through librdkafka."""

from __future__ import annotations

import threading
import time

import pytest
from helpers import rawwire as rw
from helpers.clienthelpers import (
    ck_config,
    ck_produce,
    ck_read,
    create_topic,
    kp_consumer,
    kp_produce,
    kp_producer,
    kp_read,
)

pytestmark = pytest.mark.timeout(120)


# ---------------------------------------------------------------- ordering
def test_pipelined_requests_answered_in_order(module_server):
    with rw.Conn(module_server.port) as c:
        c.send(b"".join(rw.request(rw.API_API_VERSIONS, 0, 100 + i) for i in range(30)))
        got = []
        for _ in range(30):
            frame = c.recv_frame()
            assert frame is not None
            got.append(int.from_bytes(frame[:4], "big", signed=True))
    assert got == list(range(100, 130))


def test_mixed_pipelined_produce_and_metadata_in_order(module_server, topic_name):
    create_topic(module_server.bootstrap, topic_name, partitions=1)
    frames = []
    for i in range(10):
        batch = rw.record_batch([(None, b"pipe-%d" % i)])
        frames.append(rw.request(rw.API_PRODUCE, 3, 1000 + 2 * i, rw.produce_v3(topic_name, 0, batch)))
        frames.append(rw.request(rw.API_METADATA, 4, 1001 + 2 * i,
                                 rw.metadata_v4([topic_name], False)))
    with rw.Conn(module_server.port) as c:
        c.send(b"".join(frames))
        order, offsets = [], []
        for _ in range(20):
            frame = c.recv_frame()
            assert frame is not None
            corr = int.from_bytes(frame[:4], "big", signed=True)
            order.append(corr)
            if corr % 2 == 0:
                ((err, base),) = rw.parse_produce_v3_response(frame[4:]).values()
                assert err == 0
                offsets.append(base)
    assert order == list(range(1000, 1020))
    assert offsets == list(range(10))


def test_acks0_produce_gets_no_response(module_server, topic_name):
    create_topic(module_server.bootstrap, topic_name, partitions=1)
    batch = rw.record_batch([(None, b"fire-and-forget")])
    with rw.Conn(module_server.port) as c:
        c.send(rw.request(rw.API_PRODUCE, 3, 1, rw.produce_v3(topic_name, 0, batch, acks=0))
               + rw.request(rw.API_API_VERSIONS, 0, 2))
        frame = c.recv_frame()
        assert frame is not None
        assert int.from_bytes(frame[:4], "big", signed=True) == 2, "acks=0 produce was answered"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        recs = kp_read(module_server.bootstrap, topic_name)
        if recs:
            break
        time.sleep(0.1)
    assert [r.value for r in recs] == [b"fire-and-forget"]


# ---------------------------------------------------------------- idempotence
def test_idempotent_duplicate_and_gap(module_server, topic_name):
    create_topic(module_server.bootstrap, topic_name, partitions=1)
    with rw.Conn(module_server.port) as c:
        corr, body = c.call(rw.request(rw.API_INIT_PRODUCER_ID, 0, 1, rw.init_producer_id_v0()))
        err, pid, epoch = rw.parse_init_producer_id_v0(body)
        assert err == 0 and pid >= 0 and epoch >= 0

        def send(seq, values, corr):
            batch = rw.record_batch([(None, v) for v in values], producer_id=pid,
                                    producer_epoch=epoch, base_sequence=seq)
            res = c.call(rw.request(rw.API_PRODUCE, 3, corr, rw.produce_v3(topic_name, 0, batch)))
            assert res is not None and res[0] == corr
            ((e, base),) = rw.parse_produce_v3_response(res[1]).values()
            return e, base

        assert send(0, [b"a0", b"a1", b"a2"], 10) == (0, 0)
        # the same batch again (a client retry): acknowledged with the original offset
        e, base = send(0, [b"a0", b"a1", b"a2"], 11)
        assert e in (0, rw.DUPLICATE_SEQUENCE_NUMBER), e
        if e == 0:
            assert base == 0
        assert send(3, [b"b3"], 12) == (0, 3)
        # a gap in the sequence
        e, _ = send(10, [b"gap"], 13)
        assert e == rw.OUT_OF_ORDER_SEQUENCE_NUMBER, e
        # still fine afterwards
        assert send(4, [b"c4"], 14) == (0, 4)
    assert [r.value for r in kp_read(module_server.bootstrap, topic_name)] == [
        b"a0", b"a1", b"a2", b"b3", b"c4"]


def test_confluent_idempotent_pipelined_keeps_order(module_server, topic_name):
    """librdkafka with 5 requests in flight and tiny batches: offsets follow send order,
    nothing duplicated or lost."""
    create_topic(module_server.bootstrap, topic_name, partitions=1)
    items = [{"value": b"p%05d" % i, "partition": 0} for i in range(3000)]
    written = ck_produce(module_server.bootstrap, topic_name, items,
                         **{"enable.idempotence": True, "linger.ms": 0,
                            "batch.num.messages": 7, "max.in.flight": 5})
    assert [(r.offset, r.value) for r in written] == [(i, it["value"])
                                                      for i, it in enumerate(items)]
    read = ck_read(module_server.bootstrap, topic_name, [0], end={0: 3000})
    assert [r.value for r in read] == [it["value"] for it in items]


def test_concurrent_producers_one_partition(module_server, topic_name):
    create_topic(module_server.bootstrap, topic_name, partitions=1)
    results: dict[int, list] = {}
    errors = []

    def run(n):
        try:
            results[n] = kp_produce(module_server.bootstrap, topic_name,
                                    [{"value": b"w%d-%04d" % (n, i), "partition": 0}
                                     for i in range(400)])
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert not errors, errors
    offsets = sorted(r.offset for recs in results.values() for r in recs)
    assert offsets == list(range(1600))
    for recs in results.values():  # each producer's records in its own send order
        assert [r.offset for r in recs] == sorted(r.offset for r in recs)
    read = kp_read(module_server.bootstrap, topic_name)
    assert {r.offset: r.value for r in read} == {
        r.offset: r.value for recs in results.values() for r in recs}


# ---------------------------------------------------------------- fetch edge cases
def test_first_batch_returned_whole_above_max_bytes(module_server, topic_name):
    """KIP-74: a record batch bigger than the fetch limits still comes back whole."""
    create_topic(module_server.bootstrap, topic_name, partitions=1)
    big = b"B" * 300_000
    kp_produce(module_server.bootstrap, topic_name, [{"value": big}, {"value": b"small"}])
    read = kp_read(module_server.bootstrap, topic_name,
                   consumer_config={"max_partition_fetch_bytes": 1024,
                                    "fetch_max_bytes": 1024})
    assert [r.value for r in read] == [big, b"small"]
    # and through librdkafka
    read = ck_read(module_server.bootstrap, topic_name, [0], end={0: 2},
                   **{"fetch.max.bytes": 1024, "max.partition.fetch.bytes": 1024,
                      "message.max.bytes": 1000})
    assert [r.value for r in read] == [big, b"small"]


def test_offset_out_of_range_resets_earliest(module_server, topic_name):
    from kafka import TopicPartition

    create_topic(module_server.bootstrap, topic_name, partitions=1)
    kp_produce(module_server.bootstrap, topic_name, [{"value": b"r%d" % i} for i in range(5)])
    consumer = kp_consumer(module_server.bootstrap, auto_offset_reset="earliest")
    try:
        tp = TopicPartition(topic_name, 0)
        consumer.assign([tp])
        consumer.seek(tp, 1000)  # beyond the log end: OFFSET_OUT_OF_RANGE, then reset
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            for msgs in consumer.poll(timeout_ms=500).values():
                got += [(m.offset, m.value) for m in msgs]
        assert got == [(i, b"r%d" % i) for i in range(5)]
    finally:
        consumer.close()


def test_message_max_bytes(server_factory, topic_name):
    from kafka.errors import MessageSizeTooLargeError

    srv = server_factory(settings={"message.max.bytes": 10000})
    create_topic(srv.bootstrap, topic_name, partitions=1)
    kp_produce(srv.bootstrap, topic_name, [{"value": b"ok" * 100}])
    producer = kp_producer(srv.bootstrap, max_request_size=1_000_000, retries=0)
    try:
        fut = producer.send(topic_name, value=b"x" * 20000)
        with pytest.raises(MessageSizeTooLargeError):
            fut.get(timeout=30)
    finally:
        producer.close(timeout=10)
    assert [r.value for r in kp_read(srv.bootstrap, topic_name)] == [b"ok" * 100]
    # raw: the partition error is MESSAGE_TOO_LARGE (10)
    with rw.Conn(srv.port) as c:
        res = c.call(rw.request(rw.API_PRODUCE, 3, 5, rw.produce_v3(
            topic_name, 0, rw.record_batch([(None, b"y" * 20000)]))))
        assert res is not None
        ((err, _),) = rw.parse_produce_v3_response(res[1]).values()
        assert err == rw.MESSAGE_TOO_LARGE


# ---------------------------------------------------------------- metadata
def test_metadata_auto_create_honours_request_flag(module_server, topic_name):
    with rw.Conn(module_server.port) as c:
        _, body = c.call(rw.request(rw.API_METADATA, 4, 1, rw.metadata_v4([topic_name], False)))
        md = rw.parse_metadata_v4(body)
        assert md["brokers"] == [(1, "127.0.0.1", module_server.port)]
        assert md["controller_id"] == 1
        assert md["topics"][topic_name][0] == rw.UNKNOWN_TOPIC_OR_PARTITION
        # still not created
        _, body = c.call(rw.request(rw.API_METADATA, 4, 2, rw.metadata_v4(None, False)))
        assert topic_name not in rw.parse_metadata_v4(body)["topics"]
        # allowed: created with num.partitions (3 on module_server)
        _, body = c.call(rw.request(rw.API_METADATA, 4, 3, rw.metadata_v4([topic_name], True)))
        err, _parts = rw.parse_metadata_v4(body)["topics"][topic_name]
        assert err in (0, rw.LEADER_NOT_AVAILABLE), err
        _, body = c.call(rw.request(rw.API_METADATA, 4, 4, rw.metadata_v4([topic_name], False)))
        err, parts = rw.parse_metadata_v4(body)["topics"][topic_name]
        assert err == 0
        assert parts == {p: (0, 1) for p in range(3)}


def test_auto_create_disabled(server_factory, topic_name, kcat_bin):
    from helpers.clienthelpers import kcat
    from kafka.errors import KafkaTimeoutError

    srv = server_factory(settings={"auto.create.topics.enable": "false"})
    with rw.Conn(srv.port) as c:
        _, body = c.call(rw.request(rw.API_METADATA, 4, 1, rw.metadata_v4([topic_name], True)))
        assert rw.parse_metadata_v4(body)["topics"][topic_name][0] == rw.UNKNOWN_TOPIC_OR_PARTITION
    producer = kp_producer(srv.bootstrap, max_block_ms=2000)
    try:
        with pytest.raises(KafkaTimeoutError):
            producer.send(topic_name, value=b"x").get(timeout=10)
    finally:
        producer.close(timeout=5)
    proc = kcat(kcat_bin, srv.bootstrap, "-L", "-t", topic_name, check=False, timeout=30)
    assert b"Unknown topic" in proc.stdout + proc.stderr, proc
    # explicit creation still works
    create_topic(srv.bootstrap, topic_name, partitions=2)
    assert kp_produce(srv.bootstrap, topic_name, [{"value": b"x", "partition": 1}])[0].offset == 0


def test_many_partitions(module_server, topic_name):
    create_topic(module_server.bootstrap, topic_name, partitions=64)
    items = [{"key": b"key-%d" % i, "value": b"v%d" % i} for i in range(2000)]
    written = ck_produce(module_server.bootstrap, topic_name, items,
                         partitioner="murmur2_random", **{"linger.ms": 5})
    assert len({r.partition for r in written}) == 64
    end = {p: 0 for p in range(64)}
    for r in written:
        end[r.partition] = max(end[r.partition], r.offset + 1)
    read = ck_read(module_server.bootstrap, topic_name, range(64), end=end)
    assert sorted(read) == sorted(written)


# ---------------------------------------------------------------- admin
def test_admin_through_librdkafka(module_server, topic_name):
    """CreateTopics, Metadata, DescribeConfigs, DeleteTopics via confluent-kafka's
    AdminClient; a re-created topic starts empty at offset 0."""
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    admin = AdminClient(ck_config(module_server.bootstrap))
    fs = admin.create_topics([NewTopic(topic_name, num_partitions=2, replication_factor=1)],
                             operation_timeout=10)
    fs[topic_name].result(timeout=30)
    md = admin.list_topics(timeout=15)
    assert len(md.topics[topic_name].partitions) == 2
    assert md.controller_id == 1

    # creating it again: TOPIC_ALREADY_EXISTS
    fs = admin.create_topics([NewTopic(topic_name, num_partitions=2, replication_factor=1)])
    with pytest.raises(Exception, match="(?i)already exists"):
        fs[topic_name].result(timeout=30)

    res = admin.describe_configs([ConfigResource("topic", topic_name)])
    configs = next(iter(res.values())).result(timeout=30)
    assert isinstance(configs, dict)

    kp_produce(module_server.bootstrap, topic_name, [{"value": b"old", "partition": 0}] * 3)
    admin.delete_topics([topic_name], operation_timeout=10)[topic_name].result(timeout=30)
    deadline = time.monotonic() + 15
    while topic_name in admin.list_topics(timeout=15).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    assert topic_name not in admin.list_topics(timeout=15).topics

    admin.create_topics([NewTopic(topic_name, num_partitions=1, replication_factor=1)],
                        operation_timeout=10)[topic_name].result(timeout=30)
    again = kp_produce(module_server.bootstrap, topic_name, [{"value": b"new", "partition": 0}])
    assert again[0].offset == 0
    assert [r.value for r in kp_read(module_server.bootstrap, topic_name)] == [b"new"]


def test_describe_configs_kafka_python(module_server, topic_name):
    from helpers.clienthelpers import kp_admin
    from kafka.admin import ConfigResource, ConfigResourceType

    create_topic(module_server.bootstrap, topic_name, partitions=1)
    admin = kp_admin(module_server.bootstrap)
    try:
        res = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name)])
        assert res is not None
        res = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")])
        assert res is not None
    finally:
        admin.close()
