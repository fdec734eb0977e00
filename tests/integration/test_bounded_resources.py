"""Issue 11, bounded resources: what a hostile client can make the server hold is bounded
by settings, not by what the client announces or how many things it names. Each test
runs a real server on 127.0.0.1, attacks it over raw sockets (``rawwire``) and measures
the server's memory (VmRSS) and descriptors from ``/proc/<pid>``: counts and bytes.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from pathlib import Path

import pytest
from helpers import rawwire as rw
from helpers.procfs import server_side_queues
from helpers.rawwire import create_topic_v5, fetch_v4_repeated, parse_fetch_v4, produce_each
from helpers.waiting import wait_until

pytestmark = [pytest.mark.timeout(180)]


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


# ------------------------------------------------------------ 1. frame buffers
def test_announced_frame_sizes_cost_nothing_until_their_bytes_arrive(server_factory):
    """20 sockets each announce a 100 MB frame (under socket.request.max.bytes) and send
    6 bytes of it: the server's memory grows by a few MB, not by 2 GB. (The request
    budget is off here so that every connection is read; see the budget tests.)"""
    server = server_factory(settings={"queued.max.request.bytes": -1})
    rw.api_versions_ok(server.port)
    before = rss_kb(server.pid)
    socks = []
    try:
        for _ in range(20):
            sock = socket.create_connection((rw.HOST, server.port))
            sock.sendall(struct.pack(">i", 100_000_000) + b"\x00\x12\x00\x00\x00\x01")
            socks.append(sock)
        wait_until(lambda: len(server_side_queues(server.pid, server.port)) == 20
                 and all(rx == 0 for rx, _ in server_side_queues(server.pid, server.port)), what="the server to read the 20 prefixes", timeout=20.0)
        rw.api_versions_ok(server.port)  # and the loop went round since
        grown_mb = (rss_kb(server.pid) - before) / 1024
        assert grown_mb < 8, f"20 announced 100 MB frames raised RSS by {grown_mb:.1f} MB"
        for sock in socks:  # still open, waiting for the rest of their frame
            sock.settimeout(0.01)
            with pytest.raises(TimeoutError):
                sock.recv(1)
    finally:
        for sock in socks:
            sock.close()


def test_frame_above_socket_request_max_bytes_is_closed_unread(server_factory):
    """As Kafka: a size prefix above socket.request.max.bytes (default 104857600) closes
    the connection; the server holds nothing for it."""
    server = server_factory()
    with rw.Conn(server.port) as c:
        c.send(struct.pack(">i", 104857600 + 1) + b"\x00" * 6)
        assert c.closed_by_server(timeout=10)
    rw.api_versions_ok(server.port)
    assert "socket.request.max.bytes" in server.output()


def _send_what_fits(sock: socket.socket, data: bytes, deadline: float) -> int:
    """Send from a non-blocking socket until ``data`` is gone or the peer stops reading
    (nothing accepted for 0.5 s, or ``deadline``); returns the bytes sent."""
    sent = 0
    idle_since = time.monotonic()
    while sent < len(data) and time.monotonic() < deadline:
        try:
            n = sock.send(data[sent:sent + (1 << 20)])
        except BlockingIOError:
            if time.monotonic() - idle_since > 0.5:
                break
            time.sleep(0.01)
            continue
        sent += n
        idle_since = time.monotonic()
    return sent


def test_queued_max_request_bytes_bounds_requests_in_flight(server_factory):
    """queued.max.request.bytes=8 MB: 20 sockets each send 5 MB of a 5 MB frame but for
    its last byte. Once 8 MB are reserved (Kafka's pool: granted while any is left, so
    two frames) the others are not read: memory grows by ~10 MB, not 100 MB; a new
    client waits; when the hogs go away the budget is back and it is served."""
    server = server_factory(settings={"queued.max.request.bytes": 8 << 20})
    rw.api_versions_ok(server.port)
    before = rss_kb(server.pid)
    size = 5 << 20
    frame_but_one = struct.pack(">i", size) + rw.request(rw.API_API_VERSIONS, 0, 1)[4:] \
        + b"\x00" * (size - 10 - len(rw.request(rw.API_API_VERSIONS, 0, 1)) + 4)
    hogs = []
    try:
        deadline = time.monotonic() + 60
        for _ in range(20):
            sock = socket.create_connection((rw.HOST, server.port))
            sock.setblocking(False)
            _send_what_fits(sock, frame_but_one, deadline)
            hogs.append(sock)
        queues = wait_until(lambda: (q := server_side_queues(server.pid, server.port))
                          and len(q) == 20 and q, what="20 connections", timeout=20.0)
        # two frames got their reservation and were read to the byte they miss
        read_in_full = wait_until(lambda: [rx for rx, _ in server_side_queues(
            server.pid, server.port)].count(0) >= 2 and server_side_queues(server.pid, server.port), what="two frames read", timeout=20.0)
        unread = [rx for rx, _ in read_in_full if rx > 0]
        assert len(unread) >= 17, f"the server read {20 - len(unread)} of 20 hogs ({queues})"
        grown_mb = (rss_kb(server.pid) - before) / 1024
        print(f"8 MB budget, 20 hogs of 5 MB: RSS +{grown_mb:.1f} MB, {len(unread)} not read")
        assert grown_mb < 25, f"RSS grew {grown_mb:.0f} MB with an 8 MB request budget"
        # a new client's request waits for budget ...
        waiting = rw.Conn(server.port)
        waiting.send(rw.request(rw.API_API_VERSIONS, 0, 42))
        with pytest.raises(TimeoutError):
            waiting.recv_frame(timeout=1.0)
        # ... until the hogs go away and give their reservations back
        for sock in hogs:
            sock.close()
        hogs.clear()
        frame = waiting.recv_frame(timeout=20)
        assert frame is not None and struct.unpack_from(">i", frame)[0] == 42
        waiting.close()
        rw.api_versions_ok(server.port)
    finally:
        for sock in hogs:
            sock.close()


def test_client_that_never_reads_pins_at_most_one_response(server_factory, topic_name):
    """A client pipelines 50,000 fetches whose responses (~60 KB each, sent inline) it
    never reads: the server dispatches a request only while the connection's output is
    under the transport's high-water mark, so it stops reading from that client and its
    memory grows by a few MB (before: by every response read ahead)."""
    server = server_factory()
    create = rw.Conn(server.port)
    create.call(rw.request(rw.API_METADATA, 4, 1, rw.metadata_v4([topic_name], True)))
    create.close()
    produce_each(server.port, topic_name, 0, [bytes([i]) * 60_000 for i in range(4)])
    request = rw.request(rw.API_FETCH, 4, 7, fetch_v4_repeated(topic_name, 0, 0, 60_000))
    with rw.Conn(server.port) as warm:  # the fetch path's first use, outside the measure
        for _ in range(20):
            assert warm.call(request) is not None
    before = rss_kb(server.pid)
    hog = socket.create_connection((rw.HOST, server.port))
    hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    hog.setblocking(False)
    try:
        sent = _send_what_fits(hog, request * 50_000, time.monotonic() + 60)
        assert sent < len(request) * 50_000, "the server read every pipelined fetch"
        grown_mb = (rss_kb(server.pid) - before) / 1024
        print(f"never-reading client: {sent} request bytes sent, RSS +{grown_mb:.2f} MB")
        with rw.Conn(server.port) as other:  # another client is served meanwhile
            corr, body = other.call(rw.request(rw.API_FETCH, 4, 9, fetch_v4_repeated(
                topic_name, 0, 0, 60_000)))
            assert parse_fetch_v4(body)[0][2:] == (0, 60_072)  # one batch: 61 + 11 bytes around the value
        assert grown_mb < 10, f"RSS grew {grown_mb:.0f} MB for one client that never reads"
    finally:
        hog.close()
    rw.api_versions_ok(server.port)


# ------------------------------------------------------------ 3. duplicate partitions
def test_fetch_naming_a_partition_1900_times_is_answered_once(server_factory, topic_name):
    """As Kafka (FetchRequest.fetchData is a map keyed by topic-partition): a partition
    named 1,900 times is read and answered once, with the last mention's offset; the
    response is ~57 KB, not 108 MB, and the server's memory does not grow with it."""
    server = server_factory()
    with rw.Conn(server.port) as c:
        c.call(rw.request(rw.API_METADATA, 4, 1, rw.metadata_v4([topic_name], True)))
    produce_each(server.port, topic_name, 0, [b"a" * 57_000, b"b" * 57_000])
    before = rss_kb(server.pid)
    one = rw.i32(0) + rw.i64(0) + rw.i32(1 << 20)
    last = rw.i32(0) + rw.i64(1) + rw.i32(1 << 20)  # the last mention asks for offset 1
    body = (rw.i32(-1) + rw.i32(0) + rw.i32(1) + rw.i32(256 << 20) + rw.i8(0)
            + rw.i32(2)
            + rw.string(topic_name) + rw.i32(1899) + one * 1899
            + rw.string(topic_name) + rw.i32(1) + last)
    with rw.Conn(server.port) as c:
        frame = c.call(rw.request(rw.API_FETCH, 4, 3, body), timeout=30)
    assert frame is not None
    corr, response = frame
    assert corr == 3 and len(response) < 100_000, f"a {len(response)}-byte response"
    answered = parse_fetch_v4(response)
    assert [(t, p, e) for t, p, e, _ in answered] == [(topic_name, 0, 0)]
    assert b"b" * 1000 in response and b"a" * 1000 not in response  # offset 1: the last one
    grown_mb = (rss_kb(server.pid) - before) / 1024
    assert grown_mb < 10, f"RSS grew {grown_mb:.0f} MB for one duplicated fetch"


def test_fetch_max_bytes_caps_what_the_request_asks_for(server_factory, topic_name):
    """fetch.max.bytes (Kafka's broker cap, default 55 MiB) bounds a response whatever the
    request's max_bytes says; the first batch still comes whole (KIP-74)."""
    server = server_factory(settings={"fetch.max.bytes": 100_000, "num.partitions": 4})
    with rw.Conn(server.port) as c:
        c.call(rw.request(rw.API_METADATA, 4, 1, rw.metadata_v4([topic_name], True)))
    for p in range(4):
        produce_each(server.port, topic_name, p, [bytes([65 + p]) * 60_000])
    parts = b"".join(rw.i32(p) + rw.i64(0) + rw.i32(1 << 20) for p in range(4))
    body = (rw.i32(-1) + rw.i32(0) + rw.i32(1) + rw.i32(256 << 20) + rw.i8(0)
            + rw.i32(1) + rw.string(topic_name) + rw.i32(4) + parts)
    with rw.Conn(server.port) as c:
        corr, response = c.call(rw.request(rw.API_FETCH, 4, 3, body))
    sizes = [size for _, _, _, size in parse_fetch_v4(response)]
    assert len(sizes) == 4 and sizes[0] > 60_000 and sum(sizes) < 130_000, sizes


def _delete_topic(port: int, name: str) -> int:
    from kafkaproto import decode_response, encode_request
    from kafkaproto.messages import DeleteTopicsRequest

    with rw.Conn(port) as c:
        assert c.send(encode_request(20, 4, 1, "bounded", DeleteTopicsRequest(
            topic_names=[name], timeout_ms=10000)))
        frame = c.recv_frame()
    assert frame is not None
    _, response = decode_response(20, 4, frame)
    return response.responses[0].error_code


def test_delete_dir_names_fit_a_file_name():
    from logserver.log.local_log import delete_dir_name

    name = delete_dir_name("t" * 249 + "-99999", "f" * 32)
    assert len(name.encode()) == 255 and name.endswith("-99999." + "f" * 32 + "-delete")
    assert delete_dir_name("short-3", "a" * 32) == "short-3." + "a" * 32 + "-delete"


def test_a_249_character_topic_is_created_used_deleted_and_gone(server_factory):
    """Kafka's longest topic name (249 characters): created, written, deleted; its
    directory is renamed (topic cut to fit 255 bytes, as Kafka) and removed; a 250-character
    name is INVALID_TOPIC_EXCEPTION."""
    server = server_factory(settings={"log.segment.delete.delay.ms": 0})
    name = "x" * 249
    assert create_topic_v5(server.port, name, 2)[0] == 0
    produce_each(server.port, name, 1, [b"kept until deleted"])
    assert server.partition_dir(name, 1).is_dir()
    assert _delete_topic(server.port, name) == 0
    assert server.data_dir is not None
    wait_until(lambda: not any(p.name.startswith("x" * 200) for p in server.data_dir.iterdir()), what="the deleted topic's directories to be removed", timeout=20.0)
    assert "File name too long" not in server.output()
    assert create_topic_v5(server.port, name, 1)[0] == 0  # the name is free again
    code, message = create_topic_v5(server.port, "y" * 250)
    assert code == 17 and "249" in (message or "")  # INVALID_TOPIC_EXCEPTION


# ------------------------------------------------------------ 6. timestamps
YEAR_9999_MS = 253_402_214_400_000  # 9999-12-31T00:00:00Z
INVALID_TIMESTAMP = 32


def _produce_at(port: int, topic: str, timestamp: int, value: bytes = b"v") -> int:
    with rw.Conn(port) as c:
        res = c.call(rw.request(rw.API_PRODUCE, 3, 1, rw.produce_v3(
            topic, 0, rw.record_batch([(None, value)], base_timestamp=timestamp))))
    assert res is not None
    return rw.parse_produce_v3_response(res[1])[(topic, 0)][0]


def test_timestamps_out_of_kip_937_bounds_are_invalid_timestamp(server_factory):
    """log.message.timestamp.after.max.ms (Kafka 4 default: one hour) refuses a year-9999
    CreateTime with INVALID_TIMESTAMP; the per-topic message.timestamp.*.max.ms override
    it; LogAppendTime topics are not checked (the broker stamps its own time)."""
    server = server_factory()
    now = int(time.time() * 1000)
    assert create_topic_v5(server.port, "created")[0] == 0
    assert _produce_at(server.port, "created", YEAR_9999_MS) == INVALID_TIMESTAMP
    assert _produce_at(server.port, "created", now + 30 * 60_000) == 0  # within the hour
    assert _produce_at(server.port, "created", now - 10 * 365 * 86_400_000) == 0  # no limit
    assert create_topic_v5(server.port, "strict", configs={
        "message.timestamp.after.max.ms": "1000",
        "message.timestamp.before.max.ms": "60000"})[0] == 0
    assert _produce_at(server.port, "strict", now + 60_000) == INVALID_TIMESTAMP
    assert _produce_at(server.port, "strict", now - 3_600_000) == INVALID_TIMESTAMP
    assert _produce_at(server.port, "strict", int(time.time() * 1000)) == 0
    assert create_topic_v5(server.port, "appended", configs={
        "message.timestamp.type": "LogAppendTime"})[0] == 0
    assert _produce_at(server.port, "appended", YEAR_9999_MS) == 0
    # the broker-wide setting
    loose = server_factory(settings={"log.message.timestamp.after.max.ms": 2**63 - 1})
    assert create_topic_v5(loose.port, "created")[0] == 0
    assert _produce_at(loose.port, "created", YEAR_9999_MS) == 0


def test_a_year_9999_batch_no_longer_stops_time_retention(server_factory):
    """A batch stamped 9999 (accepted where the limit is lifted, or written before it
    existed) makes its segment's largest timestamp useless as an age: retention ages
    that segment by its file's last write instead, so it and every later closed segment
    still go after retention.ms."""
    server = server_factory(settings={"log.retention.check.interval.ms": 200,
                                      "log.segment.bytes": 4096})
    assert create_topic_v5(server.port, "forever", configs={
        "retention.ms": "1000", "message.timestamp.after.max.ms": str(2**63 - 1)})[0] == 0
    assert _produce_at(server.port, "forever", YEAR_9999_MS, b"z" * 100) == 0
    old = int(time.time() * 1000) - 3_600_000
    for i in range(60):  # ~1.1 KB batches: several segments roll
        assert _produce_at(server.port, "forever", old, b"%d" % i + b"y" * 1000) == 0
    # No count of the rolled segments here: retention may be deleting them already (the
    # records are an hour old). One segment left, not the first: segment 0 (the year-9999
    # batch) went, and so did every closed one after it (retention deletes a prefix).
    bases = lambda: [int(f.stem) for f in server.segment_files("forever", 0)]  # noqa: E731
    wait_until(lambda: len(bases()) == 1 and bases()[0] > 0, timeout=30, what="retention to delete every closed segment, the year-9999 one first")


# ------------------------------------------------------------ one bad compacted batch
def test_an_unreadable_batch_in_a_compacted_topic_stops_no_other_cleanup(server_factory):
    """A CRC-valid batch whose records do not decode, on disk in a compacted topic (as
    an older version or a bad disk left it): compaction keeps it and logs it, and the
    same passes still apply retention to another topic (the attack list: one such batch
    used to make every retention and compaction pass fail for all topics)."""
    import crc32c

    settings = {"log.retention.check.interval.ms": 300, "log.cleaner.backoff.ms": 300,
                "log.segment.bytes": 2048}
    server = server_factory(settings=settings)
    assert create_topic_v5(server.port, "kept", configs={"cleanup.policy": "compact"})[0] == 0
    with rw.Conn(server.port) as c:
        for i in range(12):  # ~700-byte batches of 3 keys: several segments
            batch = rw.record_batch([(b"k%d" % (i % 3), b"%d" % i + b"v" * 200)] * 3)
            res = c.call(rw.request(rw.API_PRODUCE, 3, i, rw.produce_v3("kept", 0, batch)))
            assert res is not None and rw.parse_produce_v3_response(res[1])[("kept", 0)][0] == 0
    assert len(server.segment_files("kept", 0)) > 2
    server.stop()
    first = server.segment_files("kept", 0)[0]
    with open(first, "r+b") as f:
        head = f.read(12)
        f.seek(0)
        batch = bytearray(f.read(int.from_bytes(head[8:12], "big") + 12))
        batch[61:61 + 16] = b"\xff" * 16  # the first record's length: a broken varint
        batch[17:21] = crc32c.crc32c(bytes(batch[21:])).to_bytes(4, "big")  # CRC-valid
        f.seek(0)
        f.write(batch)
    server.start()
    assert create_topic_v5(server.port, "aged", configs={"retention.ms": "1000"})[0] == 0
    old = int(time.time() * 1000) - 3_600_000
    for i in range(8):
        assert _produce_at(server.port, "aged", old, b"%d" % i + b"y" * 1000) == 0
    assert len(server.segment_files("aged", 0)) > 2
    wait_until(lambda: "compaction keeps batch at offset 0" in server.output(), timeout=30, what="compaction to meet the unreadable batch")
    wait_until(lambda: len(server.segment_files("aged", 0)) == 1, timeout=30, what="retention of the other topic")
    assert "log cleanup failed" not in server.output()


def test_unique_partitions_keeps_first_place_and_last_mention():
    """Kafka's FetchRequest map without sockets: (topic, partition) once, first place,
    last mention's fields; the same topic listed twice merges into its first entry."""
    from types import SimpleNamespace as NS

    from logserver.fetch_wanted import unique_partitions

    def part(p, offset):
        return NS(partition=p, fetch_offset=offset)

    wanted = unique_partitions([
        NS(topic="a", partitions=[part(1, 10), part(0, 5), part(1, 11)]),
        NS(topic="b", partitions=[part(0, 1)]),
        NS(topic="a", partitions=[part(0, 6), part(2, 7)]),
    ])
    assert [(t.topic, [(p.partition, p.fetch_offset) for p in ps]) for t, ps in wanted] == [
        ("a", [(1, 11), (0, 6), (2, 7)]), ("b", [(0, 1)])]
    # Fetch v13+: topics are told apart by id, the name is empty.
    by_id = unique_partitions([
        NS(topic="", topic_id=b"\x01" * 16, partitions=[part(0, 1)]),
        NS(topic="", topic_id=b"\x02" * 16, partitions=[part(0, 2)]),
        NS(topic="", topic_id=b"\x01" * 16, partitions=[part(0, 3)]),
    ], by_id=True)
    assert [(t.topic_id, [(p.partition, p.fetch_offset) for p in ps]) for t, ps in by_id] == [
        (b"\x01" * 16, [(0, 3)]), (b"\x02" * 16, [(0, 2)])]


def test_file_handles_allowed_by_the_descriptor_limit():
    from logserver.descriptor_budget import file_handles_allowed, reserved

    assert file_handles_allowed(400) == 400 - reserved(400) == 222
    assert file_handles_allowed(1024) == 768
    assert file_handles_allowed(10) == 16  # never zero: a few segments can always be open
