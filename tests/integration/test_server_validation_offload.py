"""zstd batches validated on a pool thread (produce.validation.thread.min.bytes):
appends keep the order their requests arrived in, refusals still reach their producer,
and acks=0 batches are appended all the same."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from helpers.batchforge import forge
from helpers.clienthelpers import kp_read
from helpers.kafkaclient import BlockingClient

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.batch import Compression
from kafkaproto.messages import CreateTopicsRequest, ListOffsetsRequest, ProduceRequest
from kafkaproto.records import build_batch
from logserver.partition import Partition
from logserver.storage.memory import MemoryLog
from logserver.topic_config import TopicConfig
from logserver.validation_offload import ValidationOffload

TOPIC = "offload"
VERSION = 9  # zstd needs v7+
CONFIG = TopicConfig()


def _request(batch: bytes, acks: int = -1) -> ProduceRequest:
    return ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=batch)])])


def _values(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}{i}".encode() * 20 for i in range(count)]


def _batch(values: list[bytes], codec: Compression = Compression.NONE) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([(None, v, [], now) for v in values], compression=codec)


def _latest(client: BlockingClient) -> int:
    response = client.call(ApiKey.LIST_OFFSETS, 7, ListOffsetsRequest(
        replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(name=TOPIC, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])]))
    return int(response.topics[0].partitions[0].offset)


@pytest.fixture
def client(server_factory):
    server = server_factory(settings={"produce.validation.thread.min.bytes": 0})
    conn = BlockingClient(server.port, "offload-test", timeout=15)
    response = conn.call(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(
        topics=[CreateTopicsRequest.CreatableTopic(name=TOPIC, num_partitions=1,
                                                   replication_factor=1)], timeout_ms=5000))
    assert response.topics[0].error_code == ErrorCode.NONE
    conn.server = server  # type: ignore[attr-defined]  # the test reads it back with a client
    yield conn
    conn.close()


def test_pipelined_appends_keep_arrival_order_around_offloaded_validation(client):
    a, b, c, d = _values("a", 50), _values("b", 1), _values("c", 10), _values("d", 1)
    garbage = forge(b"\x01not zstd at all" * 64, record_count=1, attributes=int(Compression.ZSTD))
    batches = [_batch(a, Compression.ZSTD), _batch(b), bytes(garbage),
               _batch(c, Compression.LZ4), _batch(d)]
    for batch in batches:  # all in flight before the first answer is read
        client.send(ApiKey.PRODUCE, VERSION, _request(batch))
    answers = []
    for _ in batches:
        part = client.recv().responses[0].partition_responses[0]
        answers.append((part.error_code, part.base_offset))
    assert answers[0] == (ErrorCode.NONE, 0)
    assert answers[1] == (ErrorCode.NONE, 50)  # uncompressed, queued behind the zstd batch
    assert answers[2][0] == ErrorCode.CORRUPT_MESSAGE
    assert answers[3] == (ErrorCode.NONE, 51)  # lz4: validated on the loop, still in order
    assert answers[4] == (ErrorCode.NONE, 61)
    values = [r.value for r in kp_read(client.server.bootstrap, TOPIC)]
    assert values == a + b + c + d


def test_lz4_batch_alone_is_validated_on_the_loop(client):
    """Only zstd goes to the thread (the codec that measured faster there)."""
    offload = ValidationOffload(0)
    try:
        assert not offload.takes(memoryview(_batch(_values("l", 3), Compression.LZ4)))
        assert offload.takes(memoryview(_batch(_values("z", 3), Compression.ZSTD)))
    finally:
        offload.close()
    client.send(ApiKey.PRODUCE, VERSION, _request(_batch(_values("l", 3), Compression.LZ4)))
    part = client.recv().responses[0].partition_responses[0]
    assert (part.error_code, part.base_offset) == (ErrorCode.NONE, 0)


def test_acks_zero_offloaded_batch_is_appended(client):
    values = _values("z", 5)
    client.send(ApiKey.PRODUCE, VERSION, _request(_batch(values, Compression.ZSTD), acks=0),
                expect_response=False)
    deadline = time.monotonic() + 10
    while _latest(client) < 5:
        assert time.monotonic() < deadline, "the acks=0 batch never became visible"
        time.sleep(0.01)
    assert [r.value for r in kp_read(client.server.bootstrap, TOPIC)] == values


# -- the Partition itself, on the in-memory log (no sockets) ------------------------------


async def _held_offload() -> tuple[ValidationOffload, threading.Event]:
    """An offload whose one thread is busy until the returned event is set."""
    offload = ValidationOffload(0)
    release, started = threading.Event(), threading.Event()

    def hold() -> None:
        started.set()
        release.wait(10)

    asyncio.ensure_future(offload.run(hold))
    await asyncio.sleep(0)  # the job is submitted once the task first runs
    assert started.wait(10)
    return offload, release


def test_partition_deleted_while_validating_refuses_the_append():
    async def scenario() -> None:
        offload, release = await _held_offload()
        try:
            log_ = MemoryLog(TOPIC, CONFIG)
            partition = Partition(TOPIC, 0, log_, CONFIG, offload=offload)
            batch = memoryview(bytearray(_batch(_values("x", 3), Compression.ZSTD)))
            first = partition.append(batch, VERSION)
            assert first.deferred is not None
            small = partition.append(memoryview(bytearray(_batch(_values("y", 1)))), VERSION)
            assert small.deferred is not None  # queued behind the first: order
            partition.retire()
            release.set()
            refused = await first.deferred
            assert refused.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert (await small.deferred).error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert log_.log_end_offset == 0
        finally:
            release.set()
            offload.close()

    asyncio.run(scenario())


def test_partition_appends_in_arrival_order_while_validation_runs():
    async def scenario() -> None:
        offload, release = await _held_offload()
        try:
            log_ = MemoryLog(TOPIC, CONFIG)
            partition = Partition(TOPIC, 0, log_, CONFIG, offload=offload)
            big = partition.append(
                memoryview(bytearray(_batch(_values("x", 3), Compression.ZSTD))), VERSION)
            small = partition.append(memoryview(bytearray(_batch(_values("y", 1)))), VERSION)
            assert big.deferred is not None and small.deferred is not None
            assert log_.log_end_offset == 0  # nothing appended before the big one is checked
            release.set()
            assert (await small.deferred).base_offset == 3
            assert (await big.deferred).base_offset == 0
            assert log_.log_end_offset == 4
            # Nothing waiting any more: an uncompressed batch is appended at once again.
            again = partition.append(memoryview(bytearray(_batch(_values("z", 1)))), VERSION)
            assert again.deferred is None and again.base_offset == 4
        finally:
            release.set()
            offload.close()

    asyncio.run(scenario())


def test_acks_zero_offloaded_batch_refused_closes_the_connection(client):
    """An acks=0 batch refused by the validation on the pool thread still closes the
    connection, as Kafka does for any acks=0 produce error (KafkaApis
    handleProduceRequest); a good one before it is appended and answered nothing."""
    good = _values("g", 3)
    garbage = forge(b"\x01not zstd at all" * 64, record_count=1, attributes=int(Compression.ZSTD))
    refused = BlockingClient(client.server.port, "offload-acks0", timeout=15)
    try:
        refused.send(ApiKey.PRODUCE, VERSION, _request(_batch(good, Compression.ZSTD), acks=0),
                     expect_response=False)
        refused.send(ApiKey.PRODUCE, VERSION, _request(bytes(garbage), acks=0),
                     expect_response=False)
        deadline = time.monotonic() + 15
        closed = False
        while not closed and time.monotonic() < deadline:
            try:
                closed = refused.sock.recv(1) == b""  # no answer to either: only the close
            except ConnectionResetError:
                closed = True
            except TimeoutError:
                break
        assert closed, "the connection stayed open after a refused acks=0 batch"
    finally:
        refused.close()
    assert _latest(client) == 3
    assert [r.value for r in kp_read(client.server.bootstrap, TOPIC)] == good
