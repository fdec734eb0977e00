"""Fetch v13-v16 by topic id (KIP-516): ids are created with the topic, returned by
CreateTopics and Metadata, stable across restarts (also in each partition directory's
``partition.metadata``), new for a re-created name; an unknown id gets UNKNOWN_TOPIC_ID.
Raw wire with our codec; librdkafka 2.x consumes with Fetch v16 in every other test."""

from __future__ import annotations

import logging

import pytest
from helpers.clienthelpers import ck_produce, ck_read
from helpers.rawwire import Conn

from kafkaproto import ApiKey, ErrorCode, decode_response, encode_request
from kafkaproto.messages import (
    CreateTopicsRequest,
    DeleteTopicsRequest,
    FetchRequest,
    MetadataRequest,
)
from kafkaproto.records import decode_batch
from logserver.log.partition_metadata import read_topic_id

pytestmark = pytest.mark.timeout(120)


def call(conn: Conn, api: int, version: int, request):  # type: ignore[no-untyped-def]
    conn.send(encode_request(api, version, 9, "ids", request))
    frame = conn.recv_frame()
    assert frame is not None
    return decode_response(api, version, frame)[1]


def create(conn: Conn, name: str, partitions: int) -> bytes:
    response = call(conn, ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(
        topics=[CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions,
                                                   replication_factor=1, assignments=[], configs=[])],
        timeout_ms=10000, validate_only=False))
    result = response.topics[0]
    assert result.error_code == ErrorCode.NONE
    assert len(result.topic_id) == 16 and result.topic_id != bytes(16)
    return bytes(result.topic_id)


def metadata_id(conn: Conn, name: str) -> bytes:
    response = call(conn, ApiKey.METADATA, 12, MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=name)], allow_auto_topic_creation=False))
    assert response.topics[0].error_code == ErrorCode.NONE
    return bytes(response.topics[0].topic_id)


def fetch_by_id(conn: Conn, topic_id: bytes, partitions: list[int], version: int = 16):  # type: ignore[no-untyped-def]
    request = FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
        topics=[FetchRequest.FetchTopic(topic_id=topic_id, partitions=[
            FetchRequest.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20)
            for p in partitions])])
    response = call(conn, ApiKey.FETCH, version, request)
    assert response.error_code == ErrorCode.NONE
    [topic] = response.responses
    assert bytes(topic.topic_id) == topic_id
    return topic.partitions


def values(records: bytes) -> list[bytes | None]:
    out: list[bytes | None] = []
    position = 0
    while position < len(records):
        header, batch = decode_batch(records, position)
        out.extend(r.value for r in batch)
        position += header.size
    return out


@pytest.mark.parametrize("version", [13, 14, 15, 16])
def test_fetch_by_topic_id(server, topic_name, version):
    with Conn(server.port) as conn:
        topic_id = create(conn, topic_name, 2)
        assert metadata_id(conn, topic_name) == topic_id
        ck_produce(server.bootstrap, topic_name, [{"value": b"v%d" % p, "partition": p} for p in (0, 1)])
        partitions = fetch_by_id(conn, topic_id, [0, 1, 7], version)
        assert [(p.partition_index, p.error_code, p.high_watermark) for p in partitions] == [
            (0, ErrorCode.NONE, 1), (1, ErrorCode.NONE, 1),
            (7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)]
        assert values(bytes(partitions[0].records)) == [b"v0"]
        assert values(bytes(partitions[1].records)) == [b"v1"]
        unknown = fetch_by_id(conn, bytes(range(16)), [0], version)
        assert [(p.partition_index, p.error_code) for p in unknown] == [(0, ErrorCode.UNKNOWN_TOPIC_ID)]


def test_topic_ids_are_stable_across_restart_and_new_for_a_recreated_name(server, topic_name):
    with Conn(server.port) as conn:
        topic_id = create(conn, topic_name, 1)
    ck_produce(server.bootstrap, topic_name, [{"value": b"kept", "partition": 0}])
    directory = server.data_dir / f"{topic_name}-0"
    assert read_topic_id(directory) == topic_id
    (directory / "partition.metadata").unlink()  # a directory from before the file existed
    server.stop()
    server.start()
    assert read_topic_id(directory) == topic_id  # written back at open
    with Conn(server.port) as conn:
        assert metadata_id(conn, topic_name) == topic_id
        [partition] = fetch_by_id(conn, topic_id, [0])
        assert values(bytes(partition.records)) == [b"kept"]
        deleted = call(conn, ApiKey.DELETE_TOPICS, 6, DeleteTopicsRequest(
            topics=[DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=topic_id)], timeout_ms=10000))
        assert deleted.responses[0].error_code == ErrorCode.NONE
        again = create(conn, topic_name, 1)
        assert again != topic_id
        [stale] = fetch_by_id(conn, topic_id, [0])
        assert stale.error_code == ErrorCode.UNKNOWN_TOPIC_ID
        [fresh] = fetch_by_id(conn, again, [0])
        assert fresh.error_code == ErrorCode.NONE and fresh.high_watermark == 0


class _Lines(logging.Handler):
    """Collects librdkafka's log lines (confluent-kafka's ``logger`` setting)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_librdkafka_consumes_with_fetch_v16(server, topic_name):
    """librdkafka 2.x sends Fetch v16 by topic id (its protocol debug log says which)."""
    ck_produce(server.bootstrap, topic_name, [{"value": b"m%d" % i, "partition": 0} for i in range(3)])
    collected = _Lines()
    log = logging.getLogger(f"librdkafka.{topic_name}")
    log.addHandler(collected)
    log.setLevel(logging.DEBUG)
    got = ck_read(server.bootstrap, topic_name, [0], end={0: 3}, **{"debug": "protocol", "logger": log})
    assert [r.value for r in got] == [b"m0", b"m1", b"m2"]
    sent = [line for line in collected.lines if "Sent FetchRequest" in line]
    assert sent and all("(v16," in line for line in sent)
