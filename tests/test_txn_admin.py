"""Transaction admin APIs (DescribeTransactions, ListTransactions, DescribeProducers)
through kafka-python 3.0's admin client, while a confluent-kafka transaction is open and
after it commits."""

from __future__ import annotations

from kafka import TopicPartition
from kafka.admin import KafkaAdminClient
from test_txn_confluent import _create, _producer


def test_describe_and_list_transactions_and_producers(server, topic_name):
    _create(server, topic_name, partitions=2)
    txn_id = f"tx-{topic_name}"
    producer = _producer(server, txn_id, **{"transaction.timeout.ms": 20000})
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
