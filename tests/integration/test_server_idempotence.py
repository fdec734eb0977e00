"""Idempotent produce on the wire: retries are acknowledged at their first offset and
never appended twice, gaps are refused, and producer state survives restarts.

Requests are built with our codec (cross-checked against kafka-python elsewhere), so the
sequence numbers and retries are exactly the ones we choose.
"""

from __future__ import annotations

import pytest
from helpers.kafkaclient import BlockingClient
from helpers.serverproc import ServerProcess

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import (
    CreateTopicsRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    ProduceRequest,
)
from kafkaproto.records import build_batch

PRODUCE_VERSION = 9
TOPIC = "idem"


class Client(BlockingClient):
    """One Kafka connection speaking through the kafkaproto client core."""

    def __init__(self, port: int) -> None:
        super().__init__(port, "idem-test", timeout=10)

    def produce(self, batch: bytes, acks: int = -1) -> tuple[int, int]:
        request = ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=batch)])])
        response = self.call(ApiKey.PRODUCE, PRODUCE_VERSION, request)
        partition = response.responses[0].partition_responses[0]
        return partition.error_code, partition.base_offset

    def latest_offset(self) -> int:
        request = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
            name=TOPIC, partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
        response = self.call(ApiKey.LIST_OFFSETS, 7, request)
        return response.topics[0].partitions[0].offset


def _batch(producer_id: int, epoch: int, sequence: int, count: int = 2) -> bytes:
    records = [(b"k", f"seq{sequence + i}".encode(), [], 1_700_000_000_000 + i) for i in range(count)]
    return build_batch(records, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence)


@pytest.fixture(params=["event-loop-writes", "writer-thread"])
def server(request, tmp_path) -> ServerProcess:
    """Each test twice: appends written on the event loop, and every append handed to
    the writer thread (log.writer.thread.min.bytes=0), whose order and producer state
    must be the same."""
    settings = {"log.writer.thread.min.bytes": 0} if request.param == "writer-thread" else {}
    srv = ServerProcess(tmp_path / "data", settings=settings)
    request.addfinalizer(srv.stop)  # by pid, even when the test failed
    srv.start()
    return srv


@pytest.fixture
def client(server):
    conn = Client(server.port)
    response = conn.call(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(
        topics=[CreateTopicsRequest.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1)],
        timeout_ms=5000))
    assert response.topics[0].error_code == ErrorCode.NONE
    yield conn
    conn.close()


def _init_producer_id(conn: Client, producer_id: int = -1, epoch: int = -1) -> tuple[int, int]:
    response = conn.call(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000, producer_id=producer_id, producer_epoch=epoch))
    assert response.error_code == ErrorCode.NONE
    return response.producer_id, response.producer_epoch


def test_producer_ids_are_unique(client):
    ids = {_init_producer_id(client)[0] for _ in range(5)}
    assert len(ids) == 5


def test_retry_is_acknowledged_at_its_first_offset_and_not_appended_again(client):
    pid, epoch = _init_producer_id(client)
    assert client.produce(_batch(pid, epoch, 0)) == (ErrorCode.NONE, 0)
    assert client.produce(_batch(pid, epoch, 2)) == (ErrorCode.NONE, 2)
    # Both batches retried, as a producer does after a lost response.
    assert client.produce(_batch(pid, epoch, 0)) == (ErrorCode.NONE, 0)
    assert client.produce(_batch(pid, epoch, 2)) == (ErrorCode.NONE, 2)
    assert client.latest_offset() == 4


def test_sequence_gap_is_refused_and_nothing_appended(client):
    pid, epoch = _init_producer_id(client)
    assert client.produce(_batch(pid, epoch, 0)) == (ErrorCode.NONE, 0)
    error, _ = client.produce(_batch(pid, epoch, 5))
    assert error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert client.latest_offset() == 2
    assert client.produce(_batch(pid, epoch, 2)) == (ErrorCode.NONE, 2)


def test_epoch_bump_restarts_sequences_and_fences_the_old_epoch(client):
    pid, epoch = _init_producer_id(client)
    assert client.produce(_batch(pid, epoch, 0)) == (ErrorCode.NONE, 0)
    same_pid, new_epoch = _init_producer_id(client, pid, epoch)
    assert (same_pid, new_epoch) == (pid, epoch + 1)
    assert client.produce(_batch(pid, new_epoch, 0)) == (ErrorCode.NONE, 2)
    error, _ = client.produce(_batch(pid, epoch, 2))
    assert error == ErrorCode.INVALID_PRODUCER_EPOCH


def test_acks_zero_gets_no_response_and_responses_stay_in_order(client):
    pid, epoch = _init_producer_id(client)
    produce = ProduceRequest(acks=0, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=_batch(pid, epoch, 0))])])
    client.send(ApiKey.PRODUCE, PRODUCE_VERSION, produce, expect_response=False)
    # The next answer on this connection must be the ListOffsets one: nothing for acks=0
    # (the client core refuses a response whose correlation id is not the ListOffsets one).
    assert client.latest_offset() == 2


@pytest.mark.parametrize("how", ["clean", "kill9"])
def test_producer_state_survives_restart(server, client, how):
    pid, epoch = _init_producer_id(client)
    assert client.produce(_batch(pid, epoch, 0)) == (ErrorCode.NONE, 0)
    assert client.produce(_batch(pid, epoch, 2)) == (ErrorCode.NONE, 2)
    client.close()
    if how == "clean":
        server.stop()
        server.start()
    else:
        server.kill9()
        server.start()
    again = Client(server.port)
    try:
        assert again.produce(_batch(pid, epoch, 2)) == (ErrorCode.NONE, 2)
        assert again.latest_offset() == 4
        error, _ = again.produce(_batch(pid, epoch, 9))
        assert error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        # Ids handed out after the restart never repeat the ones from before.
        assert _init_producer_id(again)[0] > pid
    finally:
        again.close()
