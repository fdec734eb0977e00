"""Transaction admin APIs (DescribeTransactions, ListTransactions, DescribeProducers)
through kafka-python 3.0's admin client, while a confluent-kafka transaction is open and
after it commits."""

from __future__ import annotations

import pytest
from helpers.txn_clients import consume_all, create_topics, txn_producer
from kafka import TopicPartition
from kafka import errors as Errors
from kafka.admin import KafkaAdminClient


def test_describe_and_list_transactions_and_producers(server, topic_name):
    create_topics(server, topic_name, partitions=2)
    txn_id = f"tx-{topic_name}"
    producer = txn_producer(server, txn_id, **{"transaction.timeout.ms": 20000})
    producer.begin_transaction()
    producer.produce(topic_name, value=b"v", partition=1)
    producer.flush(10)
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        described = admin.describe_transactions([txn_id])[txn_id]
        assert str(described.state.value) == "Ongoing"
        assert described.transaction_timeout_ms == 20000
        assert set(described.topic_partitions) == {TopicPartition(topic_name, 1)}

        def listed(state: str) -> list[str]:
            by_broker = admin.list_transactions(state_filters=[state])
            return [t.transactional_id for listings in by_broker.values() for t in listings]

        assert txn_id in listed("Ongoing")
        assert txn_id not in listed("CompleteCommit")
        states = admin.describe_producers([TopicPartition(topic_name, 1)])
        active = states[TopicPartition(topic_name, 1)].active_producers
        assert [(p.producer_id, p.current_transaction_start_offset) for p in active] == [
            (described.producer_id, 0)]

        producer.commit_transaction(15)
        described = admin.describe_transactions([txn_id])[txn_id]
        assert str(described.state.value) == "CompleteCommit"
        assert txn_id in listed("CompleteCommit")
        active = admin.describe_producers([TopicPartition(topic_name, 1)])[
            TopicPartition(topic_name, 1)].active_producers
        assert [p.current_transaction_start_offset for p in active] == [-1]
    finally:
        admin.close()


def test_admin_abort_of_a_hanging_transaction(server, topic_name):
    """kafka-python's abort_transaction (WriteTxnMarkers) ends a transaction its producer
    left open in a partition: read_committed consumers move past it."""
    from confluent_kafka import Producer
    from kafka.admin import AbortTransactionSpec

    create_topics(server, topic_name, partitions=1)
    txn_producer(server, f"tx-{topic_name}")  # epoch 0; the next one gets epoch 1
    producer = txn_producer(server, f"tx-{topic_name}", **{"transaction.timeout.ms": 600000})
    producer.begin_transaction()
    producer.produce(topic_name, value=b"hanging")
    producer.flush(10)
    plain = Producer({"bootstrap.servers": server.bootstrap})
    plain.produce(topic_name, value=b"plain")
    plain.flush(10)
    assert consume_all(server, topic_name, "read_committed", quiet_s=0.5) == []
    tp = TopicPartition(topic_name, 0)
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        (state,) = admin.describe_producers([tp])[tp].active_producers
        assert state.current_transaction_start_offset == 0
        assert state.producer_epoch == 1
        with pytest.raises(Errors.InvalidProducerEpochError):
            admin.abort_transaction(AbortTransactionSpec(tp, state.producer_id, 0))
        admin.abort_transaction(AbortTransactionSpec(tp, state.producer_id, state.producer_epoch))
        (state,) = admin.describe_producers([tp])[tp].active_producers
        assert state.current_transaction_start_offset == -1
    finally:
        admin.close()
    assert consume_all(server, topic_name, "read_committed", quiet_s=0.5) == [b"plain"]
