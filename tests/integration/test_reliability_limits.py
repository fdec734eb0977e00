"""Limits are features: each exceeded limit gets Kafka's error or a documented outcome,
against a real server process over real sockets.

Connection limits (max.connections, max.connections.per.ip, max.connection.creation.rate)
close the new connection at once (Kafka has no error code for them either);
connections.max.idle.ms closes idle connections; socket.request.max.bytes closes the
connection from the size prefix alone; message.max.bytes gives MESSAGE_TOO_LARGE;
max.topics / max.partitions give POLICY_VIOLATION; a client that never reads its
responses only pauses itself.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from pathlib import Path

import pytest
from helpers.rawwire import (
    Conn,
    api_versions_ok,
    parse_produce_v3_response,
    produce_v3,
    record_batch,
    request,
)
from helpers.serverproc import HOST

from kafkaproto import encode_request
from kafkaproto.messages import CreateTopicsRequest, FetchRequest, MetadataRequest

pytestmark = [pytest.mark.timeout(120)]

POLICY_VIOLATION = 44
MESSAGE_TOO_LARGE = 10


def _open(port: int, source: str | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(5)
    if source:
        sock.bind((source, 0))
    sock.connect((HOST, port))
    return sock


def _served(sock: socket.socket) -> bool:
    """True if the server answers ApiVersions v0 on this socket, False if it closed it."""
    try:
        sock.sendall(request(18, 0, 1))
        head = sock.recv(4)
        return len(head) == 4
    except (ConnectionError, TimeoutError, OSError):
        return False


def _served_soon(port: int, source: str | None = None, timeout: float = 10.0) -> socket.socket:
    """A new connection that is served, retried until a slot is free (the server notices
    a closed connection, e.g. the start-up probe's, a moment after the close)."""
    deadline = time.monotonic() + timeout
    while True:
        sock = _open(port, source)
        if _served(sock):
            return sock
        sock.close()
        assert time.monotonic() < deadline, "no connection slot came free"
        time.sleep(0.05)


def test_max_connections(server_factory):
    server = server_factory(settings={"max.connections": 5})
    held = [_served_soon(server.port)]  # once the start-up probe's slot is released
    held += [_open(server.port) for _ in range(4)]
    assert all(_served(s) for s in held)
    extra = _open(server.port)
    assert not _served(extra), "a 6th connection must be closed"
    held.pop().close()
    again = _served_soon(server.port)  # "a freed slot must be usable again"
    for s in [*held, extra, again]:
        s.close()
    assert "max.connections reached" in server.output()


def test_max_connections_per_ip(server_factory):
    server = server_factory(settings={"max.connections.per.ip": 2})
    a = [_served_soon(server.port, "127.0.0.1")]  # once the start-up probe's slot is released
    a.append(_open(server.port, "127.0.0.1"))
    assert all(_served(s) for s in a)
    assert not _served(_open(server.port, "127.0.0.1"))
    b = _open(server.port, "127.0.0.2")  # another address still gets in
    assert _served(b)
    assert "max.connections.per.ip reached" in server.output()


def test_connection_creation_rate(server_factory):
    rate = 5
    server = server_factory(settings={"max.connection.creation.rate": rate})
    # A burst far beyond the rate: the bucket holds one second's worth (the start-up
    # probe took one token), and it refills at `rate` per second while the burst lasts.
    burst = 60
    started = time.monotonic()
    socks = [_open(server.port) for _ in range(burst)]  # admitted or refused on accept
    results = [_served(s) for s in socks]
    elapsed = time.monotonic() - started
    for s in socks:
        s.close()
    served = sum(results)
    assert served >= rate - 1, results  # the tokens left after the probe
    assert served <= rate + rate * elapsed + 1, (served, elapsed, results)
    assert served < burst, "no connection was refused"
    assert "max.connection.creation.rate reached" in server.output()
    # the bucket refills: a later connection is served again
    _served_soon(server.port).close()


def test_idle_connections_are_closed(server_factory):
    server = server_factory(settings={"connections.max.idle.ms": 1000})
    idle = Conn(server.port)
    busy = Conn(server.port)
    api_versions_ok(conn=idle)
    deadline = time.monotonic() + 30
    while not idle.closed_by_server(timeout=0.1):  # until the idle one is closed...
        api_versions_ok(conn=busy)  # ...activity keeps this one open
        assert time.monotonic() < deadline, "the idle connection was never closed"
    api_versions_ok(conn=busy)
    assert "connections.max.idle.ms" in server.output()


def test_oversized_request_closed_before_the_body(server_factory):
    server = server_factory(settings={"socket.request.max.bytes": 100_000})
    with Conn(server.port) as c:
        c.send(struct.pack(">i", 50_000_000) + b"\x00" * 10)  # only the size prefix matters
        assert c.closed_by_server(timeout=5)
    api_versions_ok(server.port)
    assert "socket.request.max.bytes" in server.output()


def test_message_max_bytes(server_factory):
    server = server_factory(settings={"message.max.bytes": 2000})
    with Conn(server.port) as c:
        small = record_batch([(None, b"x" * 100)])
        big = record_batch([(None, b"y" * 5000)])
        assert _create(c, 9, "limits", 1) == (0, None)
        corr, body = c.call(request(0, 3, 1, produce_v3("limits", 0, small)))
        assert parse_produce_v3_response(body)[("limits", 0)][0] == 0
        corr, body = c.call(request(0, 3, 2, produce_v3("limits", 0, big)))
        assert parse_produce_v3_response(body)[("limits", 0)][0] == MESSAGE_TOO_LARGE
        api_versions_ok(conn=c)  # the connection stays usable


def _create(c: Conn, corr: int, name: str, partitions: int) -> tuple[int, str | None]:
    from kafkaproto import decode_response

    req = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=5000, validate_only=False)
    assert c.send(encode_request(19, 5, corr, "limits", req))
    frame = c.recv_frame()
    _, response = decode_response(19, 5, frame)
    topic = response.topics[0]
    return topic.error_code, topic.error_message


def test_max_topics_and_partitions(server_factory):
    from kafkaproto import decode_response

    server = server_factory(settings={"max.topics": 2, "max.partitions": 5,
                                      "num.partitions": 1})
    with Conn(server.port) as c:
        assert _create(c, 1, "a", 3) == (0, None)
        code, message = _create(c, 2, "b", 3)
        assert code == POLICY_VIOLATION and "max.partitions" in message
        assert _create(c, 3, "b", 2)[0] == 0
        code, message = _create(c, 4, "c", 1)
        assert code == POLICY_VIOLATION and "max.topics" in message
        # auto-creation through Metadata is refused the same way
        req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="auto")],
                              allow_auto_topic_creation=True)
        assert c.send(encode_request(3, 9, 5, "limits", req))
        _, response = decode_response(3, 9, c.recv_frame())
        assert response.topics[0].error_code == POLICY_VIOLATION


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def test_client_that_never_reads_stalls_only_itself(server_factory):
    """A client pipelines hundreds of 1 MB fetches and never reads: the server stops
    reading from it once its socket buffer is full (queued.max.requests and write
    back-pressure), memory stays bounded, and another client is served normally."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    server = server_factory(settings={"queued.max.requests": 4})
    producer = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 5})
    for i in range(2000):
        producer.produce("wide", value=bytes(1000) + str(i).encode(), partition=0)
    assert producer.flush(30) == 0
    rss_before = _rss_kb(server.pid)

    fetch = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=2 << 20,
                         isolation_level=0, session_id=0, session_epoch=-1, topics=[
                             FetchRequest.FetchTopic(topic="wide", partitions=[
                                 FetchRequest.FetchPartition(
                                     partition=0, fetch_offset=0, partition_max_bytes=2 << 20)])],
                         forgotten_topics_data=[])
    frame = encode_request(1, 11, 1, "never-reads", fetch)
    hog = socket.create_connection((HOST, server.port))
    hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    hog.setblocking(False)
    sent_bytes = 0
    stop = threading.Event()
    stalled = threading.Event()  # the server stopped reading: sends blocked for a second
    max_frames = 200_000  # ~20 MB of requests; far more than any socket buffers hold

    def flood() -> None:
        nonlocal sent_bytes
        pending = frame * 50
        blocked_since: float | None = None
        while not stop.is_set() and sent_bytes < max_frames * len(frame):
            try:
                n = hog.send(pending)
            except BlockingIOError:
                blocked_since = blocked_since or time.monotonic()
                if time.monotonic() - blocked_since >= 1.0:
                    stalled.set()
                time.sleep(0.01)
                continue
            except OSError:
                return
            blocked_since = None
            sent_bytes += n
            pending = pending[n:] or frame * 50
    thread = threading.Thread(target=flood, daemon=True)
    thread.start()
    assert stalled.wait(60), (f"the server kept reading {sent_bytes // len(frame)} pipelined "
                              f"fetches from a client that reads nothing: no back-pressure")
    assert sent_bytes < max_frames * len(frame)

    # meanwhile an ordinary client produces and reads back, promptly
    started = time.monotonic()
    producer.produce("other", value=b"still-served")
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "x",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("other", 0, 0)])
    msg = None
    while msg is None and time.monotonic() - started < 60:
        msg = consumer.poll(0.5)
    consumer.close()
    # served at all while the hog's requests are stuck (how fast: benchmarks/, not here)
    assert msg is not None and msg.value() == b"still-served"
    growth_mb = (_rss_kb(server.pid) - rss_before) / 1024
    assert growth_mb < 150, f"server memory grew {growth_mb:.0f} MB for one non-reading client"
    stop.set()
    hog.close()
    thread.join(timeout=5)
    api_versions_ok(server.port)
