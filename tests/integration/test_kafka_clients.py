"""The project's two Kafka clients (commonlib.kafkaclient) against a real broker process:
versions negotiated, requests pipelined and answered in order, an acks=0 Produce that
gets no answer, a request that skips the answers of requests given up on, and failures
(nothing listening, a broker that stops, a connection closed under waiting requests)
raised as KafkaConnectionError, which is also a ConnectionError."""

from __future__ import annotations

import asyncio

import pytest
from helpers.clienthelpers import create_topic
from helpers.kafkaclient import produce_request
from helpers.serverproc import HOST, ServerProcess

from commonlib.childproc import free_port
from commonlib.kafkaclient import AsyncConnection, BlockingConnection, KafkaConnectionError
from kafkaproto import ApiKey
from kafkaproto.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchRequest,
    ListGroupsRequest,
    MetadataRequest,
    MetadataResponse,
)


def _metadata() -> MetadataRequest:
    return MetadataRequest(topics=None, allow_auto_topic_creation=False)


def _long_poll(topic: str) -> FetchRequest:
    """A Fetch at the log end that waits 10 s for records that do not come."""
    return FetchRequest(
        replica_id=-1, max_wait_ms=10_000, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])


def test_blocking_pipelines_negotiates_and_skips_given_up_answers(
        module_server: ServerProcess, topic_name: str) -> None:
    create_topic(module_server.bootstrap, topic_name, 1)
    with BlockingConnection(HOST, module_server.port, client_id="clients-test") as conn:
        table = conn.negotiate()
        assert table.supports(ApiKey.METADATA)
        version = conn.version(ApiKey.METADATA, 9)
        first = conn.send(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
        second = conn.send(ApiKey.METADATA, version, _metadata())
        answers = [conn.receive(), conn.receive()]
        assert [a.correlation_id for a in answers] == [first, second]
        assert isinstance(answers[0].body, ApiVersionsResponse)
        assert isinstance(answers[1].body, MetadataResponse)
        # acks=0: no answer; had the broker sent one, the core would match it to the next
        # request and fail.
        conn.send(ApiKey.PRODUCE, 7, produce_request(topic_name, 0, [b"x"], acks=0),
                  expect_response=False)
        assert conn.ask(ApiKey.LIST_GROUPS, ListGroupsRequest(), ceiling=4).error_code == 0
        # An answer still due to a request given up on is read and dropped.
        conn.send(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
        assert isinstance(conn.request(ApiKey.METADATA, version, _metadata()), MetadataResponse)
        assert conn.core.in_flight == 0


def test_blocking_failures_are_connection_errors(tmp_path) -> None:
    port = free_port()
    with pytest.raises(KafkaConnectionError, match=f"cannot connect to {HOST}:{port}") as refused:
        BlockingConnection(HOST, port, client_id="clients-test", timeout=5)
    assert isinstance(refused.value, ConnectionError) and refused.value.retriable
    server = ServerProcess(tmp_path / "data")
    try:
        server.start()
        conn = BlockingConnection(HOST, server.port, client_id="clients-test", timeout=10)
        conn.negotiate()
        server.stop()
        with pytest.raises(ConnectionError):  # closed by the broker (or reset)
            conn.request(ApiKey.METADATA, 1, _metadata())
        conn.close()
    finally:
        server.stop()


def test_async_pipelines_calls_back_and_fails_waiting_requests(
        module_server: ServerProcess, topic_name: str) -> None:
    create_topic(module_server.bootstrap, topic_name, 1)

    async def scenario() -> None:
        conn = await AsyncConnection.open(HOST, module_server.port, client_id="clients-test")
        version = conn.version(ApiKey.METADATA, 9)
        futures = [conn.send(ApiKey.METADATA, version, _metadata()) for _ in range(3)]
        got: list[object] = []
        conn.send_with_callback(ApiKey.API_VERSIONS, 0, ApiVersionsRequest(),
                                lambda body, exc: got.append(exc or body))
        answers = await asyncio.gather(*futures)
        assert all(isinstance(a, MetadataResponse) for a in answers)
        assert len(got) == 1 and isinstance(got[0], ApiVersionsResponse)
        # A long poll waits at the broker; closing fails it at once, as a connection error.
        polling = conn.send(ApiKey.FETCH, 12, _long_poll(topic_name))
        await asyncio.sleep(0.2)
        assert not polling.done()
        conn.close("test closes it")
        with pytest.raises(KafkaConnectionError, match="test closes it"):
            await polling
        await asyncio.wait_for(conn.wait_closed(), 10)
        with pytest.raises(KafkaConnectionError):
            conn.send(ApiKey.METADATA, version, _metadata())

    asyncio.run(scenario())


def test_async_connect_refused_is_a_connection_error() -> None:
    port = free_port()

    async def scenario() -> None:
        with pytest.raises(KafkaConnectionError, match=f"connect {HOST}:{port}") as refused:
            await AsyncConnection.open(HOST, port, client_id="clients-test")
        assert isinstance(refused.value, ConnectionError)

    asyncio.run(scenario())
