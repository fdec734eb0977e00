"""Transactional producers of kafka-python 3.0 and aiokafka against a real server, read
back by their read_committed and read_uncommitted consumers."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic


def _create(server, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        admin.close()


def _read_kafka_python(server, topic: str, isolation: str, expected: int) -> list[bytes]:
    consumer = KafkaConsumer(topic, bootstrap_servers=server.bootstrap,
                             auto_offset_reset="earliest", isolation_level=isolation,
                             consumer_timeout_ms=3000)
    values: list[bytes] = []
    try:
        for message in consumer:  # stops after 3 s without a message
            values.append(message.value)
            if len(values) >= expected:
                break
    finally:
        consumer.close()
    return values


def test_kafka_python_transactional_producer(server, topic_name):
    _create(server, topic_name)
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, transactional_id=f"kp-{topic_name}",
                             enable_idempotence=True)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(3):
            producer.send(topic_name, f"commit-{i}".encode())
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic_name, b"abort")
        producer.flush()
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic_name, b"commit-3")
        producer.commit_transaction()
    finally:
        producer.close()
    committed = _read_kafka_python(server, topic_name, "read_committed", 5)
    assert committed == [b"commit-0", b"commit-1", b"commit-2", b"commit-3"]
    everything = _read_kafka_python(server, topic_name, "read_uncommitted", 5)
    assert everything == [b"commit-0", b"commit-1", b"commit-2", b"abort", b"commit-3"]


def test_aiokafka_transactional_producer(server, topic_name):
    _create(server, topic_name)

    async def main() -> tuple[list[bytes], list[bytes]]:
        producer = AIOKafkaProducer(bootstrap_servers=server.bootstrap,
                                    transactional_id=f"aio-{topic_name}", enable_idempotence=True)
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait(topic_name, b"commit-0")
            await producer.begin_transaction()
            await producer.send_and_wait(topic_name, b"abort")
            await producer.abort_transaction()
            async with producer.transaction():
                await producer.send_and_wait(topic_name, b"commit-1")
        finally:
            await producer.stop()
        return await _read(server, topic_name, "read_committed", 2), \
            await _read(server, topic_name, "read_uncommitted", 3)

    committed, everything = asyncio.run(main())
    assert committed == [b"commit-0", b"commit-1"]
    assert everything == [b"commit-0", b"abort", b"commit-1"]


async def _read(server, topic: str, isolation: str, expected: int) -> list[bytes]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=server.bootstrap,
                                auto_offset_reset="earliest", isolation_level=isolation)
    await consumer.start()
    values: list[bytes] = []
    try:
        async with asyncio.timeout(20):
            while len(values) < expected:
                batches = await consumer.getmany(timeout_ms=500)
                values.extend(m.value for msgs in batches.values() for m in msgs)
        # nothing else arrives (an aborted record would come after the committed ones)
        extra = await consumer.getmany(timeout_ms=1000)
        values.extend(m.value for msgs in extra.values() for m in msgs)
    finally:
        await consumer.stop()
    return values


def test_aiokafka_send_offsets_to_transaction(server, topic_name):
    """aiokafka's TxnOffsetCommit v0 / AddOffsetsToTxn v0: offsets land only on commit."""
    from aiokafka.structs import TopicPartition as AioTopicPartition
    from kafka import TopicPartition as KpTopicPartition

    _create(server, topic_name)
    group = f"g-{topic_name}"

    def committed() -> int | None:
        admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
        try:
            found = admin.list_group_offsets({group: [KpTopicPartition(topic_name, 0)]})[group]
        finally:
            admin.close()
        meta = found.get(KpTopicPartition(topic_name, 0))
        return None if meta is None or meta.offset < 0 else meta.offset

    async def main() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=server.bootstrap,
                                    transactional_id=f"aio-{topic_name}", enable_idempotence=True)
        await producer.start()
        try:
            await producer.begin_transaction()
            await producer.send_and_wait(topic_name, b"out")
            await producer.send_offsets_to_transaction({AioTopicPartition(topic_name, 0): 7}, group)
            assert committed() is None
            await producer.commit_transaction()
            assert committed() == 7
            await producer.begin_transaction()
            await producer.send_offsets_to_transaction({AioTopicPartition(topic_name, 0): 9}, group)
            await producer.abort_transaction()
            assert committed() == 7
        finally:
            await producer.stop()

    asyncio.run(main())
