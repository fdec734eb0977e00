"""Fetch size limits as Kafka applies them (KIP-74): a response never holds more record
bytes than max_bytes, except that the first batch of the first partition with data comes
whole; every partition's share stays within partition_max_bytes likewise. Checked on the
wire with our codec and with librdkafka, which drops a response larger than it asked for.
"""

from __future__ import annotations

import pytest
from helpers.clienthelpers import ck_produce, ck_read
from helpers.rawwire import Conn

from kafkaproto import ApiKey, ErrorCode, decode_response, encode_request
from kafkaproto.batch import iter_batches
from kafkaproto.messages import CreateTopicsRequest, FetchRequest

pytestmark = pytest.mark.timeout(120)

BIG = 900_000  # one record of this size per batch: a ~900 KB batch


def create(conn: Conn, name: str, partitions: int) -> None:
    request = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=10000, validate_only=False)
    conn.send(encode_request(ApiKey.CREATE_TOPICS, 7, 1, "t", request))
    frame = conn.recv_frame()
    assert frame is not None
    assert decode_response(ApiKey.CREATE_TOPICS, 7, frame)[1].topics[0].error_code == ErrorCode.NONE  # type: ignore[attr-defined]


def fetch(conn: Conn, topic: str, offsets: dict[int, int], max_bytes: int,
          partition_max_bytes: int = 1 << 20) -> dict[int, bytes]:
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes,
                           isolation_level=0, session_id=0, session_epoch=-1, topics=[
                               FetchRequest.FetchTopic(topic=topic, partitions=[
                                   FetchRequest.FetchPartition(
                                       partition=p, fetch_offset=o,
                                       partition_max_bytes=partition_max_bytes)
                                   for p, o in offsets.items()])],
                           forgotten_topics_data=[], rack_id="")
    conn.send(encode_request(ApiKey.FETCH, 12, 2, "t", request))
    frame = conn.recv_frame()
    assert frame is not None
    response = decode_response(ApiKey.FETCH, 12, frame)[1]
    out = {}
    for part in response.responses[0].partitions:  # type: ignore[attr-defined]
        assert part.error_code == ErrorCode.NONE
        out[part.partition_index] = bytes(part.records or b"")
    return out


def batch_sizes(records: bytes) -> list[int]:
    return [header.size for _, header in iter_batches(records)]


def test_fetch_response_sizes_on_the_wire(server, topic_name):
    with Conn(server.port) as conn:
        create(conn, topic_name, 2)
        for p in (0, 1):
            ck_produce(server.bootstrap, topic_name,
                       [{"value": b"%d" % p * BIG, "partition": p} for _ in range(2)],
                       **{"linger.ms": 0, "batch.num.messages": 1, "compression.type": "none"})
        # Two partitions of ~900 KB batches, max_bytes 1,000,000: only the first partition.
        got = fetch(conn, topic_name, {0: 0, 1: 0}, 1_000_000)
        assert len(batch_sizes(got[0])) == 1 and got[1] == b""
        assert sum(map(len, got.values())) <= 1_000_000
        # A limit below one batch: the first batch of the first partition comes whole,
        # nothing else (the limit is spent).
        got = fetch(conn, topic_name, {0: 0, 1: 0}, 100)
        assert batch_sizes(got[0]) == [len(got[0])] and len(got[0]) > BIG and got[1] == b""
        # The first partition has nothing at its offset: the second one's batch comes whole.
        got = fetch(conn, topic_name, {0: 2, 1: 0}, 100)
        assert got[0] == b"" and len(batch_sizes(got[1])) == 1
        # partition_max_bytes caps each partition (one ~900 KB batch each), max_bytes the sum.
        got = fetch(conn, topic_name, {0: 0, 1: 0}, 10_000_000, partition_max_bytes=1_000_000)
        assert len(batch_sizes(got[0])) == 1 and len(batch_sizes(got[1])) == 1
        got = fetch(conn, topic_name, {0: 0, 1: 0}, 10_000_000, partition_max_bytes=100)
        assert len(batch_sizes(got[0])) == 1 and got[1] == b""  # only the very first may exceed
        got = fetch(conn, topic_name, {0: 0, 1: 0}, 10_000_000, partition_max_bytes=2_000_000)
        assert len(batch_sizes(got[0])) == 2 and len(batch_sizes(got[1])) == 2


def test_librdkafka_reads_everything_with_fetch_max_bytes_below_two_batches(server, topic_name):
    with Conn(server.port) as conn:
        create(conn, topic_name, 2)
    count = 4
    for p in (0, 1):
        ck_produce(server.bootstrap, topic_name,
                   [{"value": bytes([65 + i]) * BIG, "partition": p} for i in range(count)],
                   **{"linger.ms": 0, "batch.num.messages": 1, "compression.type": "none"})
    got = ck_read(server.bootstrap, topic_name, [0, 1], end={0: count, 1: count}, timeout=60,
                  **{"fetch.max.bytes": 1_000_000, "receive.message.max.bytes": 1_100_000,
                     "max.partition.fetch.bytes": 1_048_576})
    assert sorted((r.partition, r.offset) for r in got) == [(p, o) for p in (0, 1) for o in range(count)]
    assert all(r.value == bytes([65 + r.offset]) * BIG for r in got)
