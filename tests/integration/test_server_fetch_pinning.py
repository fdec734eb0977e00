"""A fetch being sent keeps its segment file: a slow consumer mid-sendfile, while its
topic is deleted and a new topic of the same name is created and written, gets either
the original bytes (checked byte for byte) or an error / closed connection, never bytes
of another file (before slices pinned segments, the closed descriptor's number was
reused by the new topic's segment and its bytes went out under the old response)."""

from __future__ import annotations

import os
import socket
import struct

import pytest

from kafkaproto import ApiKey, decode_response, encode_request
from kafkaproto.messages import (
    CreateTopicsRequest,
    DeleteTopicsRequest,
    FetchRequest,
    ProduceRequest,
)
from kafkaproto.records import build_batch

pytestmark = [pytest.mark.timeout(180)]

TOPIC = "pinned"
BATCHES = 24  # ~24 MiB: far more than the socket buffers hold
RECORDS_PER_BATCH = 1000
RECORD_BYTES = 1000


def _round_trip(port: int, api_key: int, version: int, body: object) -> object:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(encode_request(api_key, version, 1, "pin-test", body))  # type: ignore[arg-type]
        frame = _recv_frame(sock)
    return decode_response(api_key, version, frame)[1]


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(min(n - len(out), 1 << 20))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return bytes(out)


def _recv_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    return _recv_exact(sock, size)


def _create(port: int) -> None:
    request = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=TOPIC, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=10_000, validate_only=False)
    response = _round_trip(port, ApiKey.CREATE_TOPICS, 5, request)
    assert response.topics[0].error_code == 0  # type: ignore[attr-defined]


def _delete(port: int) -> None:
    response = _round_trip(port, ApiKey.DELETE_TOPICS, 4,
                           DeleteTopicsRequest(topic_names=[TOPIC], timeout_ms=10_000))
    assert response.responses[0].error_code == 0  # type: ignore[attr-defined]


def _produce(port: int, fill: bytes) -> None:
    """BATCHES batches of random-looking records (``fill`` makes each run distinct)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        for i in range(BATCHES):
            value = (fill + os.urandom(RECORD_BYTES))[:RECORD_BYTES]
            batch = build_batch([(None, value, [], 1_000 + i)] * RECORDS_PER_BATCH)
            request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30_000,
                                     topic_data=[ProduceRequest.TopicProduceData(
                                         name=TOPIC, partition_data=[
                                             ProduceRequest.PartitionProduceData(
                                                 index=0, records=batch)])])
            sock.sendall(encode_request(ApiKey.PRODUCE, 7, i, "pin-test", request))
            _, body = decode_response(ApiKey.PRODUCE, 7, _recv_frame(sock))
            assert body.responses[0].partition_responses[0].error_code == 0  # type: ignore[attr-defined]


def _send_buffer_max() -> int:
    """The most a server socket's send buffer grows to (tcp_wmem's maximum)."""
    with open("/proc/sys/net/ipv4/tcp_wmem") as f:
        return int(f.read().split()[2])


@pytest.fixture(params=["uvloop", "asyncio"])
def server(request, server_factory):
    if request.param == "uvloop":
        pytest.importorskip("uvloop")  # a core dependency; only absent off Linux
    return server_factory(env={"LOGSERVER_EVENT_LOOP": request.param})


def test_slow_consumer_mid_sendfile_while_topic_is_deleted_and_recreated(server) -> None:
    _create(server.port)
    _produce(server.port, b"first")
    (segment,) = server.segment_files(TOPIC, 0)
    original = segment.read_bytes()  # the records exactly as stored (and as served)
    assert len(original) > 20 << 20

    slow = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.settimeout(30)
        slow.connect(("127.0.0.1", server.port))
        fetch = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=64 << 20,
                             isolation_level=0, session_id=0, session_epoch=-1, topics=[
                                 FetchRequest.FetchTopic(topic=TOPIC, partitions=[
                                     FetchRequest.FetchPartition(
                                         partition=0, fetch_offset=0,
                                         partition_max_bytes=64 << 20)])],
                             forgotten_topics_data=[])
        slow.sendall(encode_request(ApiKey.FETCH, 11, 7, "slow", fetch))
        (size,) = struct.unpack(">i", _recv_exact(slow, 4))
        received = bytearray(_recv_exact(slow, 64 << 10))
        # What the kernel can hold between the two sockets is far less than the response:
        # the server is still in the middle of sending it.
        in_kernel = _send_buffer_max() + slow.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        assert size - len(received) > 2 * in_kernel

        _delete(server.port)
        _create(server.port)
        _produce(server.port, b"second")
        (new_segment,) = server.segment_files(TOPIC, 0)
        assert new_segment.read_bytes()[:len(original)] != original

        closed_early = False
        try:
            while len(received) < size:
                chunk = slow.recv(1 << 20)
                if not chunk:
                    closed_early = True
                    break
                received += chunk
        except (ConnectionResetError, BrokenPipeError):
            closed_early = True
    finally:
        slow.close()

    start = bytes(received).find(original[:256])
    assert start > 0, "no original record bytes at the start of the response"
    got = bytes(received[start:])
    assert got == original[:len(got)], "bytes of another file were sent"
    if not closed_early:
        corr, response = decode_response(ApiKey.FETCH, 11, bytes(received))
        assert corr == 7
        records = response.responses[0].partitions[0].records  # type: ignore[attr-defined]
        assert records == original[:len(records)] and len(records) > 20 << 20
