"""Transactional produce and the transaction APIs on the wire (our codec, a real server):
batches only into partitions of the producer's open transaction, with its current epoch;
transaction.max.timeout.ms; a confluent-kafka producer asking for too long a timeout."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from helpers.kafkaclient import BlockingClient
from helpers.waiting import wait_until

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import (
    AddPartitionsToTxnRequest,
    CreateTopicsRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ProduceRequest,
)
from kafkaproto.records import build_batch

TOPIC = "wire-txn"
T0 = 1_700_000_000_000


@pytest.fixture
def conn(server_factory):
    server = server_factory(settings={"transaction.max.timeout.ms": 60000})
    client = BlockingClient(server.port, "txn-wire", timeout=10)
    created = client.call(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(
        topics=[CreateTopicsRequest.CreatableTopic(name=TOPIC, num_partitions=2, replication_factor=1)],
        timeout_ms=5000))
    assert created.topics[0].error_code == ErrorCode.NONE
    found = client.call(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key="tx", key_type=1))
    assert found.error_code == ErrorCode.NONE
    client.server = server  # type: ignore[attr-defined]
    yield client
    client.close()


def _init(conn, timeout_ms: int = 10000, version: int = 4) -> tuple[int, int, int]:
    r = conn.call(ApiKey.INIT_PRODUCER_ID, version, InitProducerIdRequest(
        transactional_id="tx", transaction_timeout_ms=timeout_ms))
    return r.error_code, r.producer_id, r.producer_epoch


def _add(conn, pid: int, epoch: int, partition: int) -> int:
    r = conn.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, AddPartitionsToTxnRequest(
        transactional_id="tx", producer_id=pid, producer_epoch=epoch, topics=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=TOPIC, partitions=[partition])]))
    return r.results[0].results[0].partition_error_code


def _produce(conn, pid: int, epoch: int, partition: int, sequence: int,
             transactional_id: str | None = "tx") -> int:
    batch = build_batch([(b"k", b"v", (), T0)], producer_id=pid, producer_epoch=epoch,
                        base_sequence=sequence, is_transactional=True)
    r = conn.call(ApiKey.PRODUCE, 9, ProduceRequest(
        transactional_id=transactional_id, acks=-1, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
                ProduceRequest.PartitionProduceData(index=partition, records=batch)])]))
    return r.responses[0].partition_responses[0].error_code


def _end(conn, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
    return conn.call(ApiKey.END_TXN, version, EndTxnRequest(
        transactional_id="tx", producer_id=pid, producer_epoch=epoch, committed=commit)).error_code


def test_transactional_batches_only_into_added_partitions(conn):
    error, pid, epoch = _init(conn)
    assert error == ErrorCode.NONE
    assert _produce(conn, pid, epoch, 0, 0) == ErrorCode.INVALID_TXN_STATE  # nothing added
    assert _add(conn, pid, epoch, 0) == ErrorCode.NONE
    assert _produce(conn, pid, epoch, 1, 0) == ErrorCode.INVALID_TXN_STATE  # not added
    assert _produce(conn, pid, epoch, 0, 0,
                    transactional_id=None) == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert _produce(conn, pid, epoch, 0, 0) == ErrorCode.NONE
    assert _end(conn, pid, epoch, True) == ErrorCode.NONE
    assert _produce(conn, pid, epoch, 0, 1) == ErrorCode.INVALID_TXN_STATE  # txn is over


def test_init_producer_id_of_a_new_transactional_id_accepts_any_id_and_epoch(conn):
    """Kafka (TransactionCoordinator.handleInitProducerId): metadata made for a
    transactional id it has never seen is valid for whatever producer id and epoch the
    request presents; @platformatic/kafka always sends id 0, epoch 0. The answer is a new
    id at epoch 0, never INVALID_PRODUCER_ID_MAPPING, and the transaction then works."""
    r = conn.call(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
        transactional_id="tx", transaction_timeout_ms=10000, producer_id=0, producer_epoch=0))
    assert (r.error_code, r.producer_epoch) == (ErrorCode.NONE, 0)
    pid = r.producer_id
    assert pid >= 0
    assert _add(conn, pid, 0, 0) == ErrorCode.NONE
    assert _produce(conn, pid, 0, 0, 0) == ErrorCode.NONE
    assert _end(conn, pid, 0, True) == ErrorCode.NONE


def test_transactional_batch_without_transactional_id_refuses_the_whole_request(conn):
    """Kafka (KafkaApis.handleProduceRequest): a Produce whose first batch of any partition
    is transactional but that names no transactional id gets
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition, ACLs or not; nothing is
    appended, not even the plain batch of another partition in the same request."""
    error, pid, epoch = _init(conn)
    assert error == ErrorCode.NONE
    assert _add(conn, pid, epoch, 0) == ErrorCode.NONE
    txn = build_batch([(b"k", b"v", (), T0)], producer_id=pid, producer_epoch=epoch,
                      base_sequence=0, is_transactional=True)
    plain = build_batch([(b"k", b"plain", (), T0)])

    def produce(transactional_id: str | None, *parts: tuple[int, bytes]) -> list[tuple[int, int]]:
        r = conn.call(ApiKey.PRODUCE, 9, ProduceRequest(
            transactional_id=transactional_id, acks=-1, timeout_ms=5000, topic_data=[
                ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
                    ProduceRequest.PartitionProduceData(index=i, records=b) for i, b in parts])]))
        return [(p.error_code, p.base_offset) for p in r.responses[0].partition_responses]

    refused = (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)
    assert produce(None, (0, txn), (1, plain)) == [refused, refused]
    assert produce(None, (1, plain), (0, txn)) == [refused, refused]
    # Nothing was appended: the first batches that are accepted land at offset 0.
    assert produce(None, (1, plain)) == [(ErrorCode.NONE, 0)]
    assert produce("tx", (0, txn)) == [(ErrorCode.NONE, 0)]


def test_acks_zero_produce_error_closes_the_connection(conn):
    """Kafka (KafkaApis.handleProduceRequest) closes the connection when a Produce with
    acks=0 fails on any partition: the producer gets no response to read the error from.
    A refused transactional batch without a transactional id does that; nothing is
    appended, and an acks=0 produce that succeeds leaves the connection open."""
    import time

    from helpers.kafkaclient import BlockingClient

    error, pid, epoch = _init(conn)
    assert error == ErrorCode.NONE
    txn = build_batch([(b"k", b"v", (), T0)], producer_id=pid, producer_epoch=epoch,
                      base_sequence=0, is_transactional=True)
    plain = build_batch([(b"k", b"plain", (), T0)])

    def acks0(client: BlockingClient, transactional_id: str | None, records: bytes) -> None:
        client.send(ApiKey.PRODUCE, 9, ProduceRequest(
            transactional_id=transactional_id, acks=0, timeout_ms=5000, topic_data=[
                ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
                    ProduceRequest.PartitionProduceData(index=1, records=records)])]),
            expect_response=False)

    # A good acks=0 produce: no answer, the connection stays usable.
    acks0(conn, None, plain)
    assert conn.call(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(
        key="tx", key_type=1)).error_code == ErrorCode.NONE

    refused = BlockingClient(conn.server.port, "acks0-refused", timeout=10)
    try:
        acks0(refused, None, txn)
        refused.sock.settimeout(10)
        deadline = time.monotonic() + 10
        closed = False
        while not closed and time.monotonic() < deadline:
            try:
                closed = refused.sock.recv(1) == b""  # no answer: only the close
            except ConnectionResetError:
                closed = True
            except TimeoutError:
                break
        assert closed, "the connection stayed open after a failed acks=0 produce"
    finally:
        refused.close()
    # Nothing of the refused request was appended: the next batch lands after the plain one.
    r = conn.call(ApiKey.PRODUCE, 9, ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000,
                  topic_data=[ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
                      ProduceRequest.PartitionProduceData(index=1, records=plain)])]))
    part = r.responses[0].partition_responses[0]
    assert (part.error_code, part.base_offset) == (ErrorCode.NONE, 1)


def test_epoch_bump_fences_the_old_producer(conn):
    _, pid, epoch = _init(conn)
    assert _add(conn, pid, epoch, 0) == ErrorCode.NONE
    assert _produce(conn, pid, epoch, 0, 0) == ErrorCode.NONE
    error, pid2, epoch2 = _init(conn)
    assert (error, pid2, epoch2) == (ErrorCode.NONE, pid, epoch + 1)
    assert _produce(conn, pid, epoch, 0, 1) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert _add(conn, pid, epoch, 0) == ErrorCode.PRODUCER_FENCED
    assert _end(conn, pid, epoch, True) == ErrorCode.PRODUCER_FENCED
    assert _end(conn, pid, epoch, True, version=1) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert _end(conn, pid2, epoch2, True) == ErrorCode.INVALID_TXN_STATE  # nothing open


def _produce_at(conn, pid: int, epoch: int, partition: int, sequence: int) -> tuple[int, int]:
    batch = build_batch([(b"k", f"seq {sequence}".encode(), (), T0)], producer_id=pid,
                        producer_epoch=epoch, base_sequence=sequence, is_transactional=True)
    r = conn.call(ApiKey.PRODUCE, 9, ProduceRequest(
        transactional_id="tx", acks=-1, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
                ProduceRequest.PartitionProduceData(index=partition, records=batch)])]))
    part = r.responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def test_a_new_transaction_reusing_an_aborted_batchs_sequence_is_out_of_order(conn):
    """Issue 21 (fault run, a leader SIGSTOPped): librdkafka took an appended batch for
    never written, and after the abort sent the next transaction's batch with the same
    sequence at the same epoch. Taken for a duplicate of the aborted batch it was
    acknowledged at that batch's offset and written nowhere, and the next transaction
    committed without its records on that partition. A batch of an ended transaction has
    no retry after its marker (clients resolve every batch before EndTxn), so the new
    batch is checked as new: its sequence is out of order (an abortable error, the
    client aborts and bumps its epoch). Within the open transaction a retry is still
    answered as the duplicate it is."""
    error, pid, epoch = _init(conn)
    assert error == ErrorCode.NONE
    assert _add(conn, pid, epoch, 0) == ErrorCode.NONE
    assert _produce_at(conn, pid, epoch, 0, 0) == (ErrorCode.NONE, 0)
    assert _produce_at(conn, pid, epoch, 0, 0) == (ErrorCode.NONE, 0)  # a retry: duplicate
    assert _end(conn, pid, epoch, False) == ErrorCode.NONE
    # The next transaction may add the partition once the abort is complete (its marker
    # written); until then the coordinator answers CONCURRENT_TRANSACTIONS.
    wait_until(lambda: _add(conn, pid, epoch, 0) == ErrorCode.NONE, 10, "the abort completes")
    assert _produce_at(conn, pid, epoch, 0, 0) == (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
    assert _produce_at(conn, pid, epoch, 0, 1) == (ErrorCode.NONE, 2)  # after the marker at 1
    assert _end(conn, pid, epoch, True) == ErrorCode.NONE


def test_transaction_timeout_above_the_maximum_is_refused(conn):
    assert _init(conn, timeout_ms=60001)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert _init(conn, timeout_ms=60000)[0] == ErrorCode.NONE
    producer = Producer({"bootstrap.servers": conn.server.bootstrap, "transactional.id": "long",
                         "transaction.timeout.ms": 120000})
    with pytest.raises(KafkaException) as info:
        producer.init_transactions(10)
    assert info.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT, info.value


def test_idle_transactional_id_expires_and_stays_forgotten(server_factory):
    import time

    from kafkaproto.messages import DescribeTransactionsRequest

    server = server_factory(settings={
        "transactional.id.expiration.ms": 500,
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 100})

    def described(client: BlockingClient) -> int:
        r = client.call(ApiKey.DESCRIBE_TRANSACTIONS, 0,
                        DescribeTransactionsRequest(transactional_ids=["tx"]))
        return r.transaction_states[0].error_code

    client = BlockingClient(server.port, "txn-expiry", timeout=10)
    try:
        assert client.call(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(
            key="tx", key_type=1)).error_code == ErrorCode.NONE
        assert _init(client)[0] == ErrorCode.NONE
        assert described(client) == ErrorCode.NONE
        deadline = time.monotonic() + 20
        while described(client) != ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
            assert time.monotonic() < deadline, "the idle transactional id never expired"
    finally:
        client.close()
    server.restart()  # the tombstone is replayed: still forgotten
    client = BlockingClient(server.port, "txn-expiry", timeout=10)
    try:
        deadline = time.monotonic() + 20
        while True:
            error = described(client)
            if error != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
                break
        assert error == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    finally:
        client.close()


def test_kip360_producer_recovers_after_its_transaction_timed_out(server_factory):
    import time

    from kafkaproto.messages import DescribeTransactionsRequest

    server = server_factory(settings={
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 100})
    client = BlockingClient(server.port, "txn-kip360", timeout=10)
    try:
        assert client.call(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(
            key="tx", key_type=1)).error_code == ErrorCode.NONE
        created = client.call(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(
            topics=[CreateTopicsRequest.CreatableTopic(name=TOPIC, num_partitions=1,
                                                       replication_factor=1)], timeout_ms=5000))
        assert created.topics[0].error_code == ErrorCode.NONE
        error, pid, epoch = _init(client, timeout_ms=500)
        assert error == ErrorCode.NONE
        assert _add(client, pid, epoch, 0) == ErrorCode.NONE
        assert _produce(client, pid, epoch, 0, 0) == ErrorCode.NONE
        deadline = time.monotonic() + 20
        while client.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsRequest(
                transactional_ids=["tx"])).transaction_states[0].transaction_state != "CompleteAbort":
            assert time.monotonic() < deadline, "the transaction never timed out"
        assert _end(client, pid, epoch, True) == ErrorCode.PRODUCER_FENCED  # its epoch was bumped
        # KIP-360: presenting its id and (now previous) epoch, it gets the id back
        r = client.call(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
            transactional_id="tx", transaction_timeout_ms=500, producer_id=pid, producer_epoch=epoch))
        assert (r.error_code, r.producer_id, r.producer_epoch) == (ErrorCode.NONE, pid, epoch + 2)
        # an epoch it never had is fenced
        r = client.call(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
            transactional_id="tx", transaction_timeout_ms=500, producer_id=pid, producer_epoch=epoch))
        assert r.error_code == ErrorCode.PRODUCER_FENCED
        assert _add(client, pid, epoch + 2, 0) == ErrorCode.NONE
        assert _produce(client, pid, epoch + 2, 0, 0) == ErrorCode.NONE
        assert _end(client, pid, epoch + 2, True) == ErrorCode.NONE
    finally:
        client.close()
