"""Produce validates every record, not only the CRC (issue 11, point 3), on a real server.

CRC-valid batches whose records lie about themselves, compressed payloads that do not
inflate or inflate past ``max.message.bytes`` (decompression bombs), and null keys on a
compacted topic are refused with Kafka's error codes; nothing is appended, the
connection and the server keep serving.
"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from helpers import rawwire as rw
from helpers.batchforge import forge, raw_record
from helpers.bombs import zeros_bomb

from kafkaproto.batch import Compression

pytestmark = pytest.mark.timeout(120)


def _produce(port: int, topic: str, batch: bytes, correlation_id: int) -> int:
    with rw.Conn(port) as c:
        res = c.call(rw.request(rw.API_PRODUCE, 3, correlation_id, rw.produce_v3(topic, 0, batch)))
        assert res is not None, "the server closed the connection on a bad batch"
        assert res[0] == correlation_id
        ((err, _),) = rw.parse_produce_v3_response(res[1]).values()
        return err


@pytest.mark.parametrize(
    "make, want",
    [
        pytest.param(lambda: forge(b"\x07not records at all", record_count=1),
                     rw.CORRUPT_MESSAGE, id="garbage-records"),
        pytest.param(lambda: forge(raw_record(offset_delta=0) + raw_record(offset_delta=1),
                                   record_count=3),
                     rw.INVALID_RECORD, id="count-says-3-records-hold-2"),
        pytest.param(lambda: forge(raw_record(offset_delta=0) + raw_record(offset_delta=5),
                                   record_count=2),
                     rw.INVALID_RECORD, id="offset-delta-out-of-order"),
        pytest.param(lambda: forge(raw_record(offset_delta=0, value_length=-7), record_count=1),
                     rw.CORRUPT_MESSAGE, id="negative-value-length"),
        pytest.param(lambda: forge(b"\x00" * 40, record_count=1, attributes=int(Compression.GZIP)),
                     rw.CORRUPT_MESSAGE, id="garbage-gzip"),
        pytest.param(lambda: forge(zeros_bomb(Compression.GZIP, 64 << 20), record_count=1,
                                   attributes=int(Compression.GZIP)),
                     rw.CORRUPT_MESSAGE, id="gzip-bomb-64MiB"),
        pytest.param(lambda: forge(zeros_bomb(Compression.ZSTD, 1 << 30), record_count=1,
                                   attributes=int(Compression.ZSTD)),
                     rw.CORRUPT_MESSAGE, id="zstd-bomb-1GiB"),
    ],
)
def test_crc_valid_but_wrong_batches_are_refused(module_server, seeded, make, want):
    topic, check = seeded
    assert _produce(module_server.port, topic, bytes(make()), 71) == want
    check()


def test_null_key_on_a_compacted_topic_is_invalid_record(module_server, topic_name):
    admin = AdminClient({"bootstrap.servers": module_server.bootstrap})
    futures = admin.create_topics([NewTopic(topic_name, 1, config={"cleanup.policy": "compact"})])
    futures[topic_name].result(30)
    assert _produce(module_server.port, topic_name, rw.record_batch([(None, b"v")]), 72) == \
        rw.INVALID_RECORD
    assert _produce(module_server.port, topic_name, rw.record_batch([(b"k", b"v")]), 73) == 0


def test_records_without_a_key_are_named_in_the_produce_response(module_server, topic_name):
    """KIP-467 on the wire: Produce v8+ answers INVALID_RECORD with record_errors (the
    index and message of each record without a key) and an error_message; the batch is
    refused whole, as Kafka does. v7 has no such fields: the same error, no detail."""
    from helpers.kafkaclient import BlockingClient

    from kafkaproto import ApiKey, ErrorCode
    from kafkaproto.messages import ProduceRequest
    from kafkaproto.records import build_batch
    from kafkaproto.validate import NULL_KEY_MESSAGE

    admin = AdminClient({"bootstrap.servers": module_server.bootstrap})
    futures = admin.create_topics([NewTopic(topic_name, 1, config={"cleanup.policy": "compact"})])
    futures[topic_name].result(30)
    keys = [b"a", None, b"c", None]
    batch = build_batch([(k, b"v", (), 1_700_000_000_000) for k in keys])

    def produce(version: int, records: bytes) -> ProduceRequest:
        client = BlockingClient(module_server.port, "record-errors", timeout=10)
        try:
            response = client.call(ApiKey.PRODUCE, version, ProduceRequest(
                transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
                    ProduceRequest.TopicProduceData(name=topic_name, partition_data=[
                        ProduceRequest.PartitionProduceData(index=0, records=records)])]))
        finally:
            client.close()
        return response.responses[0].partition_responses[0]

    for version in (8, 9):
        answer = produce(version, batch)
        assert answer.error_code == ErrorCode.INVALID_RECORD
        assert [(e.batch_index, e.batch_index_error_message) for e in answer.record_errors] == [
            (1, NULL_KEY_MESSAGE), (3, NULL_KEY_MESSAGE)]
        assert answer.error_message and "2 of the batch's 4 records" in answer.error_message
        assert answer.base_offset == -1
    assert produce(7, batch).error_code == ErrorCode.INVALID_RECORD
    # Nothing of the refused batches was appended.
    assert produce(9, build_batch([(b"k", b"v", (), 1_700_000_000_000)])).base_offset == 0


def _compacted(server, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    futures = admin.create_topics([NewTopic(topic, 1, config={"cleanup.policy": "compact"})])
    futures[topic].result(30)


def test_java_producer_fails_only_the_records_without_a_key(module_server, topic_name, tmp_path):
    """kafka-clients reads record_errors (KIP-467): the records without a key fail with
    InvalidRecordException and the broker's message for them; the others of the batch
    fail with the producer's generic "part of a batch" error, never as invalid."""
    from helpers.javaclient import run_java

    from kafkaproto.validate import NULL_KEY_MESSAGE

    _compacted(module_server, topic_name)
    done = run_java("ProduceRecordErrorsCheck", tmp_path / "classes", module_server.bootstrap,
                    topic_name, "a,-,c,-")
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr[-4000:]}"
    lines = [line for line in done.stdout.splitlines() if line.startswith("record ")]
    assert len(lines) == 4, done.stdout
    invalid = "org.apache.kafka.common.InvalidRecordException"
    for i in (1, 3):
        assert lines[i] == f"record {i} {invalid} {NULL_KEY_MESSAGE}", done.stdout
    for i in (0, 2):
        assert not lines[i].startswith(f"record {i} ok"), done.stdout
        assert invalid not in lines[i], done.stdout

