"""The fault run's seed-8 duplicate, replayed on the wire against a real broker and read
back the way the fault run reads its log (a consumer for the values, Fetch for the batch
headers), then judged by the fault run's checker.

What librdkafka sent there: a batch stored but answered "possibly persisted" (the
leader stepped down while it waited for its followers), its retry refused before any
append by the next leader-to-be, the batch after it answered OUT_OF_ORDER_SEQUENCE_NUMBER
by the new leader (its predecessor was never appended there), whereupon librdkafka bumped
the producer epoch and sent the first batch's record again as the new epoch's sequence 0.
The broker answers each of these as Kafka does (a gap refused and nothing appended, a
retry within the epoch acknowledged at its first offset, a new epoch starting anew at
sequence 0), so the record is stored twice; the checker must name it the client's
re-send, not the broker's duplicate, and still catch a same-epoch duplicate.
"""

from __future__ import annotations

import pytest
from helpers.faultrun.batches import read_writers
from helpers.faultrun.checker import check, client_resends
from helpers.faultrun.history import Ack, History, plain_value
from helpers.faultrun.workloads import read_all
from helpers.kafkaclient import BlockingClient
from helpers.serverproc import ServerProcess

from kafkaproto import ApiKey, ErrorCode
from kafkaproto.messages import CreateTopicsRequest, InitProducerIdRequest, ProduceRequest
from kafkaproto.records import build_batch

pytestmark = pytest.mark.timeout(120)

TOPIC = "resend"


@pytest.fixture
def server(tmp_path):
    srv = ServerProcess(tmp_path / "data")
    try:
        srv.start()
        yield srv
    finally:
        srv.stop()


def _produce(client: BlockingClient, producer_id: int, epoch: int, sequence: int,
             value: bytes) -> tuple[int, int]:
    batch = build_batch([(None, value, [], 1_700_000_000_000)], producer_id=producer_id,
                        producer_epoch=epoch, base_sequence=sequence)
    response = client.call(ApiKey.PRODUCE, 9, ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=batch)])]))
    answer = response.responses[0].partition_responses[0]
    return int(answer.error_code), int(answer.base_offset)


def test_a_record_resent_after_a_clients_epoch_bump_is_judged_the_clients(server):
    client = BlockingClient(server.port, "faultrun-resend", timeout=10)
    try:
        created = client.call(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(topics=[
            CreateTopicsRequest.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1)],
            timeout_ms=5000))
        assert created.topics[0].error_code == ErrorCode.NONE
        init = client.call(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
        pid = init.producer_id
        a0, a1, a2, a3 = (plain_value("a", i) for i in range(4))
        acks = []

        assert _produce(client, pid, 0, 0, a0) == (ErrorCode.NONE, 0)
        acks.append(Ack(0, 0, a0, 1.0))
        # a:1 stored at 1; the client's answer was "possibly persisted" (not acknowledged)
        assert _produce(client, pid, 0, 1, a1) == (ErrorCode.NONE, 1)
        # a:2's retry was refused before any append; a:3 reaches the leader: a gap
        error, _ = _produce(client, pid, 0, 3, a3)
        assert error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        # within the epoch a retry of a:1 is recognised (Kafka: acknowledged where it is) ...
        assert _produce(client, pid, 0, 1, a1) == (ErrorCode.NONE, 1)
        # ... but librdkafka bumped the epoch and re-sent a:1 as sequence 0: new to any broker
        assert _produce(client, pid, 1, 0, a1) == (ErrorCode.NONE, 2)
        acks.append(Ack(0, 2, a1, 2.0))
        assert _produce(client, pid, 1, 1, a2) == (ErrorCode.NONE, 3)
        acks.append(Ack(0, 3, a2, 2.0))
        assert _produce(client, pid, 1, 2, a3) == (ErrorCode.NONE, 4)
        acks.append(Ack(0, 4, a3, 2.0))
    finally:
        client.close()

    history = History(acks=acks)
    history.log = read_all(server.bootstrap, TOPIC, 1, "read_uncommitted")
    assert [v for _, v in history.log[0]] == [a0, a1, a1, a2, a3]
    history.writers = {0: read_writers(server.host, server.port, TOPIC, 0, 5)}
    assert history.writers[0] == {0: (pid, 0, 0), 1: (pid, 0, 1), 2: (pid, 1, 0),
                                  3: (pid, 1, 1), 4: (pid, 1, 2)}

    assert check(history) == []
    assert client_resends(history) == {a1: [(0, 1, (pid, 0, 1)), (0, 2, (pid, 1, 0))]}

    # had the broker stored a:1 twice under one epoch, that is its duplicate
    history.writers[0][2] = (pid, 0, 1)
    assert {v.prop for v in check(history)} == {"duplicate", "order"}
