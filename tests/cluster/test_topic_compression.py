"""A topic's compression.type is honoured as Kafka honours it (issue 21, item 8).

Topics are created with each codec (and ``uncompressed``); confluent-kafka produces
with another codec (or none); the raw batches read back with Fetch on the wire are in
the topic's codec, with the producer's id, epoch and sequences and the timestamps kept,
offsets assigned as usual, and kafka-python reads the same records. ``producer`` keeps
the producer's codec.
"""

from __future__ import annotations

import time

import pytest
from helpers.clienthelpers import ck_produce, kp_read
from helpers.rawwire import Conn
from helpers.waiting import wait_until

from kafkaproto import ApiKey, ErrorCode, decode_response, encode_request
from kafkaproto.batch import (
    CONTROL_MASK,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    Compression,
    iter_batches,
)
from kafkaproto.messages import FetchRequest

pytestmark = pytest.mark.timeout(120)

# librdkafka's codec names (producer side) and the batch codec ids they write
PRODUCER_CODECS = {"none": Compression.NONE, "gzip": Compression.GZIP,
                   "snappy": Compression.SNAPPY, "lz4": Compression.LZ4,
                   "zstd": Compression.ZSTD}
TOPIC_CODECS = {"uncompressed": Compression.NONE, "gzip": Compression.GZIP,
                "snappy": Compression.SNAPPY, "lz4": Compression.LZ4, "zstd": Compression.ZSTD}


def ck_admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 15000})


def create(bootstrap: str, name: str, config: dict[str, str]) -> None:
    from confluent_kafka.admin import NewTopic

    admin = ck_admin(bootstrap)
    admin.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(15)


def raw_batches(port: int, topic: str) -> list:
    """The headers of every batch of partition 0, as Fetch v12 sends them."""
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=16 << 20,
                           isolation_level=0, session_id=0, session_epoch=-1, topics=[
                               FetchRequest.FetchTopic(topic=topic, partitions=[
                                   FetchRequest.FetchPartition(partition=0, fetch_offset=0,
                                                               partition_max_bytes=16 << 20)])],
                           forgotten_topics_data=[], rack_id="")
    with Conn(port) as conn:
        conn.send(encode_request(ApiKey.FETCH, 12, 2, "t", request))
        frame = conn.recv_frame()
    assert frame is not None
    part = decode_response(ApiKey.FETCH, 12, frame)[1].responses[0].partitions[0]  # type: ignore[attr-defined]
    assert part.error_code == ErrorCode.NONE
    return [header for _, header in iter_batches(bytes(part.records or b""))]


def items(count: int) -> list[dict]:
    # compressible values, so every codec has something to do; headers and keys kept
    return [{"key": b"k%03d" % i, "value": b"value-%04d-" % i + b"abc" * 40,
             "headers": [("h", b"%d" % i)], "partition": 0} for i in range(count)]


def produce(bootstrap: str, topic: str, codec: str, count: int = 40) -> list:
    return ck_produce(bootstrap, topic, items(count), **{
        "compression.type": codec, "linger.ms": 50, "batch.num.messages": 10,
        "enable.idempotence": True})


@pytest.mark.parametrize(("topic_codec", "producer_codec"), [
    ("gzip", "lz4"), ("gzip", "none"), ("snappy", "zstd"), ("lz4", "none"),
    ("zstd", "gzip"), ("uncompressed", "snappy"), ("uncompressed", "zstd"),
])
def test_batches_are_stored_in_the_topics_codec(module_server, topic_name, topic_codec,
                                                producer_codec):
    bootstrap = module_server.bootstrap
    create(bootstrap, topic_name, {"compression.type": topic_codec})
    sent = produce(bootstrap, topic_name, producer_codec)
    headers = raw_batches(module_server.port, topic_name)
    assert len(headers) > 1  # several batches, each rewritten
    assert {h.compression for h in headers} == {TOPIC_CODECS[topic_codec]}
    # offsets as usual; the idempotent producer's id, epoch and sequences kept
    assert [h.base_offset for h in headers] == sorted(h.base_offset for h in headers)
    assert headers[0].base_offset == 0 and headers[-1].next_offset == len(sent)
    assert len({(h.producer_id, h.producer_epoch) for h in headers}) == 1
    assert headers[0].producer_id >= 0
    assert [h.base_sequence for h in headers] == [h.base_offset for h in headers]
    assert all(not h.attributes & TIMESTAMP_TYPE_MASK for h in headers)  # CreateTime kept
    assert kp_read(bootstrap, topic_name) == sent


def test_producer_keeps_the_producers_codec(module_server, topic_name):
    bootstrap = module_server.bootstrap
    create(bootstrap, topic_name, {"compression.type": "producer"})
    sent = produce(bootstrap, topic_name, "lz4")
    headers = raw_batches(module_server.port, topic_name)
    assert {h.compression for h in headers} == {Compression.LZ4}
    assert kp_read(bootstrap, topic_name) == sent


def test_log_append_time_and_a_changed_compression_type(module_server, topic_name):
    """LogAppendTime is stamped on the recompressed batch; AlterConfigs changes the codec
    of the batches produced after it."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    bootstrap = module_server.bootstrap
    create(bootstrap, topic_name, {"compression.type": "zstd",
                                   "message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    first = produce(bootstrap, topic_name, "gzip", 20)
    headers = raw_batches(module_server.port, topic_name)
    assert {h.compression for h in headers} == {Compression.ZSTD}
    assert all(h.attributes & TIMESTAMP_TYPE_MASK and h.max_timestamp >= before for h in headers)
    got = kp_read(bootstrap, topic_name)
    assert [(r.offset, r.key, r.value, r.headers) for r in got] == \
        [(r.offset, r.key, r.value, r.headers) for r in first]
    assert all(r.timestamp >= before for r in got)

    resource = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("compression.type", "snappy", incremental_operation=AlterConfigOpType.SET)])
    admin = ck_admin(bootstrap)  # referenced until the answer: a dropped client cancels it
    next(iter(admin.incremental_alter_configs([resource]).values())).result(15)
    produce(bootstrap, topic_name, "zstd", 20)
    wait_until(lambda: raw_batches(module_server.port, topic_name)[-1].next_offset == 40, 30,
               "the second produce")
    later = [h for h in raw_batches(module_server.port, topic_name) if h.base_offset >= 20]
    assert later and {h.compression for h in later} == {Compression.SNAPPY}


def test_transactional_batches_keep_their_attributes(module_server, topic_name):
    """A transactional producer's batches are recompressed with the transactional bit,
    producer id and epoch kept, so the markers still commit and abort them."""
    from confluent_kafka import Producer

    bootstrap = module_server.bootstrap
    create(bootstrap, topic_name, {"compression.type": "gzip"})
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4",
                         "transactional.id": topic_name, "linger.ms": 20})
    producer.init_transactions(30)
    for txn, commit in ((0, True), (1, False), (2, True)):
        producer.begin_transaction()
        for i in range(10):
            producer.produce(topic_name, key=b"k%d" % i, value=b"t%d-%d" % (txn, i) + b"x" * 50,
                             partition=0)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    producer.flush(30)

    def ended():  # markers are written after EndTxn is answered; the aborted
        # transaction has none here when librdkafka dropped its records unsent
        found = raw_batches(module_server.port, topic_name)
        markers = sum(1 for h in found if h.attributes & CONTROL_MASK)
        return found if markers >= 2 and found[-1].attributes & CONTROL_MASK else None

    headers = wait_until(ended, 30, "the commit markers")
    data = [h for h in headers if not h.attributes & CONTROL_MASK]
    markers = [h for h in headers if h.attributes & CONTROL_MASK]
    assert data
    assert {h.compression for h in data} == {Compression.GZIP}
    assert all(h.attributes & TRANSACTIONAL_MASK for h in data)
    assert {(h.producer_id, h.producer_epoch) for h in headers} == \
        {(markers[0].producer_id, markers[0].producer_epoch)}
    got = kp_read(bootstrap, topic_name, consumer_config={"isolation_level": "read_committed"})
    assert [r.value for r in got] == [b"t%d-%d" % (txn, i) + b"x" * 50
                                      for txn in (0, 2) for i in range(10)]
