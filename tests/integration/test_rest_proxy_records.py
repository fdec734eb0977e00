"""What REST Proxy reads return beyond key and value: record headers (taken on produce,
shown on reads, the same bytes Kafka clients see) and a consumer's ``isolation.level``
read_committed (aborted transactions hidden, reads stop at the last stable offset), with
confluent-kafka's transactional producer and kafka-python as the other side."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest
import requests
from helpers.clienthelpers import create_topic, kp_produce, kp_read
from helpers.serverproc import HOST, free_port
from helpers.waiting import wait_until

pytestmark = pytest.mark.timeout(120)

V2 = "application/vnd.kafka.v2+json"
JSON_V2 = "application/vnd.kafka.json.v2+json"
BINARY_V2 = "application/vnd.kafka.binary.v2+json"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()




def post(s: requests.Session, url: str, body: Any, content_type: str = V2) -> requests.Response:
    return s.post(url, data=json.dumps(body), headers={"Content-Type": content_type}, timeout=30)


@pytest.fixture
def rest(server_factory) -> tuple[Any, str]:
    port = free_port()
    srv = server_factory(settings={"rest.proxy.listeners": f"http://{HOST}:{port}"})
    return srv, f"http://{HOST}:{port}"


def test_headers_on_produce_and_reads(rest, topic_name) -> None:
    srv, url = rest
    create_topic(srv.bootstrap, topic_name, 1)
    with requests.Session() as s:
        sent = post(s, f"{url}/topics/{topic_name}", {"records": [
            {"value": {"t": 1}, "headers": [{"name": "device", "value": b64(b"dev-1")},
                                            {"name": "trace", "value": None},
                                            {"name": "device", "value": b64(b"\x00\xff")}]},
            {"value": {"t": 2}}]}, JSON_V2)
        assert sent.status_code == 200, sent.text
        bad = post(s, f"{url}/topics/{topic_name}",
                   {"records": [{"value": 3, "headers": [{"value": b64(b"x")}]}]}, JSON_V2)
        assert bad.status_code == 422 and bad.json()["error_code"] == 422
        kp_produce(srv.bootstrap, topic_name, [{"value": b"kp", "headers": [("from", b"kafka")]}])
        got = s.get(f"{url}/topics/{topic_name}/partitions/0/records?offset=0&timeout=1000",
                    headers={"Accept": BINARY_V2}, timeout=30).json()
    assert [r["offset"] for r in got] == [0, 1, 2]  # the 422 wrote nothing
    assert got[0]["headers"] == [{"name": "device", "value": b64(b"dev-1")},
                                 {"name": "trace", "value": None},
                                 {"name": "device", "value": b64(b"\x00\xff")}]
    assert "headers" not in got[1]
    assert got[2]["headers"] == [{"name": "from", "value": b64(b"kafka")}]
    seen = kp_read(srv.bootstrap, topic_name)
    assert list(seen[0].headers) == [("device", b"dev-1"), ("trace", None), ("device", b"\x00\xff")]


def test_read_committed_consumer_hides_aborted_and_open_transactions(rest, topic_name) -> None:
    from confluent_kafka import Producer

    srv, url = rest
    create_topic(srv.bootstrap, topic_name, 1)
    producer = Producer({"bootstrap.servers": srv.bootstrap, "transactional.id": f"tx-{topic_name}",
                         "linger.ms": 0})
    producer.init_transactions(60)
    for values, commit in (([b"a1", b"a2"], False), ([b"c1"], True), ([b"o1"], None)):
        producer.begin_transaction()
        for value in values:
            producer.produce(topic_name, value=value, partition=0)
        assert producer.flush(30) == 0
        if commit:
            producer.commit_transaction(30)
        elif commit is False:
            producer.abort_transaction(30)
    # The last transaction stays open; a plain record after it is not stable either.
    kp_produce(srv.bootstrap, topic_name, [{"value": b"p1", "partition": 0}])
    tp = {"topic": topic_name, "partition": 0}

    def reader(isolation: str) -> Callable[[], list[bytes]]:
        with requests.Session() as s:
            created = post(s, f"{url}/consumers/g-{isolation}", {
                "name": isolation, "auto.offset.reset": "earliest", "isolation.level": isolation})
            assert created.status_code == 200, created.text
            uri = created.json()["base_uri"]
            assert post(s, f"{uri}/assignments", {"partitions": [tp]}).status_code == 204
        taken: list[bytes] = []

        def take() -> list[bytes]:
            body = requests.get(f"{uri}/records?timeout=300", headers={"Accept": BINARY_V2},
                                timeout=30).json()
            taken.extend(base64.b64decode(r["value"]) for r in body)
            return taken
        return take

    uncommitted = reader("read_uncommitted")
    wait_until(lambda: len(uncommitted()) >= 5, what="every record read_uncommitted", timeout=60.0)
    assert uncommitted() == [b"a1", b"a2", b"c1", b"o1", b"p1"]
    committed = reader("read_committed")
    assert wait_until(committed, what="the committed record", timeout=60.0) == [b"c1"]
    assert committed() == [b"c1"]  # o1 is open: nothing past the last stable offset
    producer.commit_transaction(30)
    wait_until(lambda: len(committed()) >= 3, what="the records after the commit", timeout=60.0)
    assert committed() == [b"c1", b"o1", b"p1"]
    bad = requests.post(f"{url}/consumers/g", data=json.dumps({"isolation.level": "dirty"}),
                        headers={"Content-Type": V2}, timeout=30)
    assert bad.status_code == 422


def test_concurrent_aiohttp_webhooks_wake_a_long_poll(rest, topic_name) -> None:
    """aiohttp as a webhook relay: 30 uplinks posted at once, each its own request, while
    a by-offset read waits (long poll) for the first of them."""
    import asyncio

    import aiohttp

    srv, url = rest
    create_topic(srv.bootstrap, topic_name, 1)

    async def scenario() -> tuple[list[dict[str, Any]], list[int]]:
        async with aiohttp.ClientSession() as session:
            async def poll() -> list[dict[str, Any]]:
                async with session.get(
                        f"{url}/topics/{topic_name}/partitions/0/records?offset=0&timeout=20000",
                        headers={"Accept": JSON_V2}) as response:
                    assert response.status == 200
                    return list(await response.json(content_type=None))

            async def webhook(i: int) -> int:
                body = {"records": [{"key": f"dev-{i % 5}", "value": {"f_cnt": i}}]}
                async with session.post(f"{url}/topics/{topic_name}", json=body,
                                        headers={"Content-Type": JSON_V2}) as response:
                    assert response.status == 200, await response.text()
                    answer = await response.json(content_type=None)
                    return int(answer["offsets"][0]["offset"])

            waiting = asyncio.ensure_future(poll())
            await asyncio.sleep(0)  # let the poll go out first (it answers either way)
            offsets = await asyncio.gather(*(webhook(i) for i in range(30)))
            return await waiting, offsets

    woken, offsets = asyncio.run(scenario())
    assert sorted(offsets) == list(range(30))
    assert woken and woken[0]["offset"] == 0
    values = sorted(json.loads(r.value)["f_cnt"] for r in kp_read(srv.bootstrap, topic_name))
    assert values == list(range(30))
