"""A partition leader fences transaction markers from an older coordinator epoch
(Kafka's TRANSACTION_COORDINATOR_FENCED, 52): raw WriteTxnMarkers on a real server, the
producer state's coordinator epoch surviving a clean restart (snapshot) and a kill -9
with the snapshots gone (rebuilt from the markers in the log)."""

from __future__ import annotations

from helpers.kafkaclient import BlockingClient

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import (
    AddPartitionsToTxnRequest,
    CreateTopicsRequest,
    DescribeProducersRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    ProduceRequest,
    WriteTxnMarkersRequest,
)
from kafkaproto.records import build_batch

TXN_ID = "fenced-tx"
T0 = 1_700_000_000_000


def _client(server) -> BlockingClient:
    return BlockingClient(server.port, "txn-fencing", timeout=10)


def _open_transaction(client: BlockingClient, topic: str) -> tuple[int, int]:
    """A transaction left open in partition 0 (its coordinator's timeout far away)."""
    created = client.call(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(
        topics=[CreateTopicsRequest.CreatableTopic(name=topic, num_partitions=1,
                                                   replication_factor=1)], timeout_ms=5000))
    assert created.topics[0].error_code == ErrorCode.NONE
    found = client.call(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key=TXN_ID, key_type=1))
    assert found.error_code == ErrorCode.NONE
    init = client.call(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
        transactional_id=TXN_ID, transaction_timeout_ms=600_000))
    assert init.error_code == ErrorCode.NONE
    pid, epoch = init.producer_id, init.producer_epoch
    added = client.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, AddPartitionsToTxnRequest(
        transactional_id=TXN_ID, producer_id=pid, producer_epoch=epoch, topics=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=[0])]))
    assert added.results[0].results[0].partition_error_code == ErrorCode.NONE
    batch = build_batch([(b"k", b"v", (), T0)], producer_id=pid, producer_epoch=epoch,
                        base_sequence=0, is_transactional=True)
    produced = client.call(ApiKey.PRODUCE, 9, ProduceRequest(
        transactional_id=TXN_ID, acks=-1, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name=topic, partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=batch)])]))
    assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    return pid, epoch


def _marker(client: BlockingClient, topic: str, pid: int, epoch: int, *, commit: bool,
            coordinator_epoch: int) -> int:
    answer = client.call(ApiKey.WRITE_TXN_MARKERS, 1, WriteTxnMarkersRequest(markers=[
        WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=pid, producer_epoch=epoch, transaction_result=commit,
            coordinator_epoch=coordinator_epoch, topics=[
                WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=topic, partition_indexes=[0])])]))
    return answer.markers[0].topics[0].partitions[0].error_code


def _log_end(client: BlockingClient, topic: str) -> int:
    answer = client.call(ApiKey.LIST_OFFSETS, 4, ListOffsetsRequest(
        replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
            name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(
                partition_index=0, current_leader_epoch=-1, timestamp=-1)])]))
    partition = answer.topics[0].partitions[0]
    assert partition.error_code == ErrorCode.NONE
    return partition.offset


def _coordinator_epochs(client: BlockingClient, topic: str) -> dict[int, int]:
    answer = client.call(ApiKey.DESCRIBE_PRODUCERS, 0, DescribeProducersRequest(topics=[
        DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[0])]))
    partition = answer.topics[0].partitions[0]
    assert partition.error_code == ErrorCode.NONE
    return {p.producer_id: p.coordinator_epoch for p in partition.active_producers}


def _assert_fenced_at(client: BlockingClient, topic: str, pid: int, epoch: int,
                      coordinator_epoch: int) -> None:
    """Markers below ``coordinator_epoch`` are refused and write nothing."""
    assert _coordinator_epochs(client, topic)[pid] == coordinator_epoch
    end = _log_end(client, topic)
    for older in (coordinator_epoch - 1, 0):
        for commit in (True, False):
            assert _marker(client, topic, pid, epoch, commit=commit,
                           coordinator_epoch=older) == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert _log_end(client, topic) == end
    assert _coordinator_epochs(client, topic)[pid] == coordinator_epoch


def test_marker_from_an_older_coordinator_epoch_is_refused(server_factory, topic_name):
    server = server_factory()
    client = _client(server)
    try:
        pid, epoch = _open_transaction(client, topic_name)
        assert _coordinator_epochs(client, topic_name) == {pid: -1}  # no marker yet
        before = _log_end(client, topic_name)
        assert _marker(client, topic_name, pid, epoch, commit=False, coordinator_epoch=7) == ErrorCode.NONE
        assert _log_end(client, topic_name) == before + 1
        _assert_fenced_at(client, topic_name, pid, epoch, 7)
        # the same epoch again is that coordinator retrying: accepted, as in Kafka
        assert _marker(client, topic_name, pid, epoch, commit=False, coordinator_epoch=7) == ErrorCode.NONE
        assert _marker(client, topic_name, pid, epoch, commit=False, coordinator_epoch=9) == ErrorCode.NONE
        _assert_fenced_at(client, topic_name, pid, epoch, 9)
        # another producer's markers are fenced by its own last marker only
        other = client.call(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=60_000))
        assert other.error_code == ErrorCode.NONE
        assert _marker(client, topic_name, other.producer_id, other.producer_epoch, commit=False,
                       coordinator_epoch=2) == ErrorCode.NONE
        _assert_fenced_at(client, topic_name, other.producer_id, other.producer_epoch, 2)
    finally:
        client.close()


def test_one_node_coordinator_writes_epoch_0(server_factory, topic_name):
    """One node's coordinator is never re-elected: its markers carry epoch 0."""
    server = server_factory()
    client = _client(server)
    try:
        pid, epoch = _open_transaction(client, topic_name)
        ended = client.call(ApiKey.END_TXN, 3, EndTxnRequest(
            transactional_id=TXN_ID, producer_id=pid, producer_epoch=epoch, committed=True))
        assert ended.error_code == ErrorCode.NONE
        assert _coordinator_epochs(client, topic_name) == {pid: 0}
    finally:
        client.close()


def test_coordinator_epoch_survives_restarts(server_factory, topic_name):
    server = server_factory()
    client = _client(server)
    try:
        pid, epoch = _open_transaction(client, topic_name)
        assert _marker(client, topic_name, pid, epoch, commit=True, coordinator_epoch=5) == ErrorCode.NONE
    finally:
        client.close()

    assert server.restart() == 0  # clean: read back from the producer snapshot
    client = _client(server)
    try:
        _assert_fenced_at(client, topic_name, pid, epoch, 5)
    finally:
        client.close()

    server.kill9()  # unclean, and no snapshot at all: rebuilt from the marker in the log
    snapshots = list(server.partition_dir(topic_name, 0).glob("*.snapshot"))
    for snapshot in snapshots:
        snapshot.unlink()
    server.start()
    client = _client(server)
    try:
        _assert_fenced_at(client, topic_name, pid, epoch, 5)
        assert _marker(client, topic_name, pid, epoch, commit=False, coordinator_epoch=6) == ErrorCode.NONE
    finally:
        client.close()
    replayed = f"{topic_name}-0: producer state replayed 2 batches from offset 0 (snapshot None)"
    assert replayed in server.output_tail(200_000)
