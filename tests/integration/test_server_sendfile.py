"""Fetched record bytes leave the segment file through sendfile, not through Python.

The server reports its sendfile calls and bytes when it stops; a catch-up read of a few
MiB must go (almost) entirely through that path, and a tiny read must not.
"""

from __future__ import annotations

import re

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

RECORDS = 4000
VALUE = b"v" * 1024


def _sendfile_report(output: str) -> tuple[int, int]:
    match = re.search(r"sendfile: (\d+) calls, (\d+) bytes", output)
    assert match, f"no sendfile report in the server log:\n{output[-2000:]}"
    return int(match.group(1)), int(match.group(2))


def _produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    for i in range(count):
        producer.produce(topic, key=str(i).encode(), value=VALUE)
    assert producer.flush(30) == 0


def _consume_all(bootstrap: str, topic: str, count: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "enable.auto.offset.store": False,
                         "fetch.max.bytes": 8 * 1024 * 1024})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen = 0
        for _ in range(200):
            for message in consumer.consume(1000, timeout=0.5):
                assert message.error() is None, message.error()
                assert message.value() == VALUE
                seen += 1
            if seen >= count:
                break
        return seen
    finally:
        consumer.close()


# uvloop has no loop.sendfile: the server then calls os.sendfile on the socket itself.
EVENT_LOOPS = ["uvloop", "asyncio"]


@pytest.fixture(params=EVENT_LOOPS)
def server(request, server_factory):
    if request.param == "uvloop":
        pytest.importorskip("uvloop")  # a core dependency; only absent off Linux
    return server_factory(env={"LOGSERVER_EVENT_LOOP": request.param})


def test_catch_up_fetch_uses_sendfile(server):
    _produce(server.bootstrap, "bulk", RECORDS)
    assert _consume_all(server.bootstrap, "bulk", RECORDS) == RECORDS
    server.stop()
    assert f"event loop: {server.extra_env['LOGSERVER_EVENT_LOOP']}" in server.output()
    calls, sent = _sendfile_report(server.output())
    assert calls > 0
    # Batches are ~20 KiB+; nearly all of the ~4 MiB must have gone out by sendfile.
    assert sent >= 0.8 * RECORDS * len(VALUE), (calls, sent)


def test_small_fetch_is_read_inline(server):
    _produce(server.bootstrap, "tiny", 3)
    assert _consume_all(server.bootstrap, "tiny", 3) == 3
    server.stop()
    calls, sent = _sendfile_report(server.output())
    assert (calls, sent) == (0, 0)
