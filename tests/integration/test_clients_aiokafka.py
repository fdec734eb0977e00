"""aiokafka against a real logserver: producer (plain and idempotent) and consumer with
assign/seek (no consumer group)."""

from __future__ import annotations

import asyncio
import time

import pytest
from helpers.clienthelpers import aio_produce, aio_read, aio_run, create_topic, kp_read

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
def test_produce_consume(module_server, topic_name, idempotent):
    create_topic(module_server.bootstrap, topic_name, partitions=3)
    items = [{"key": f"key{i % 11}".encode(), "value": f"aio-{i}".encode(),
              "headers": [("i", str(i).encode())]} for i in range(200)]
    cfg = {"enable_idempotence": True} if idempotent else {"acks": "all"}
    written = aio_run(aio_produce(module_server.bootstrap, topic_name, items, **cfg))
    for p in range(3):
        offs = [r.offset for r in written if r.partition == p]
        assert offs == list(range(len(offs)))

    read = aio_run(aio_read(module_server.bootstrap, topic_name))
    assert sorted(read) == sorted(written)
    # another client sees the same
    assert sorted(kp_read(module_server.bootstrap, topic_name)) == sorted(written)


def test_seek_and_offsets(module_server, topic_name):
    from aiokafka import AIOKafkaConsumer, TopicPartition

    create_topic(module_server.bootstrap, topic_name, partitions=1)
    base = int(time.time() * 1000) - 60_000
    items = [{"value": f"s{i}".encode(), "timestamp_ms": base + i * 100} for i in range(20)]
    aio_run(aio_produce(module_server.bootstrap, topic_name, items))

    async def scenario():
        consumer = AIOKafkaConsumer(bootstrap_servers=module_server.bootstrap, group_id=None,
                                    enable_auto_commit=False, request_timeout_ms=15000)
        await consumer.start()
        try:
            tp = TopicPartition(topic_name, 0)
            consumer.assign([tp])
            assert await consumer.beginning_offsets([tp]) == {tp: 0}
            assert await consumer.end_offsets([tp]) == {tp: 20}
            found = await consumer.offsets_for_times({tp: base + 1050})
            assert found[tp].offset == 11
            consumer.seek(tp, 15)
            got = []
            deadline = time.monotonic() + 30
            while len(got) < 5 and time.monotonic() < deadline:
                batch = await consumer.getmany(tp, timeout_ms=500)
                got += [(m.offset, m.value, m.timestamp) for m in batch.get(tp, [])]
            assert got == [(i, f"s{i}".encode(), base + i * 100) for i in range(15, 20)]
            await consumer.seek_to_end(tp)
            assert await consumer.position(tp) == 20
        finally:
            await consumer.stop()

    aio_run(scenario())


def test_consumer_waits_for_new_records(module_server, topic_name):
    """A consumer at the log end receives records produced after it started."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    create_topic(module_server.bootstrap, topic_name, partitions=1)

    async def scenario():
        consumer = AIOKafkaConsumer(bootstrap_servers=module_server.bootstrap, group_id=None,
                                    enable_auto_commit=False, auto_offset_reset="latest",
                                    request_timeout_ms=15000)
        producer = AIOKafkaProducer(bootstrap_servers=module_server.bootstrap)
        await consumer.start()
        await producer.start()
        try:
            tp = TopicPartition(topic_name, 0)
            consumer.assign([tp])
            assert await consumer.position(tp) == 0

            async def later():
                await asyncio.sleep(0.5)
                await producer.send_and_wait(topic_name, b"late", partition=0)

            task = asyncio.create_task(later())
            msg = await asyncio.wait_for(consumer.getone(), 20)
            await task
            assert (msg.offset, msg.value) == (0, b"late")
        finally:
            await producer.stop()
            await consumer.stop()

    aio_run(scenario())
