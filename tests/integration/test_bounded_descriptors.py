"""Issues 11 and 27, bounded descriptors: a partition costs no descriptor of its own
(segment files go through the bounded file-handle cache, ``log.file.handles.max``), so
neither its segments nor the partition count raise the descriptors, a server always
starts again on what it created, and an empty partition makes no file at all.

Real servers on 127.0.0.1; descriptors counted in ``/proc/<pid>/fd``; the low limits are
set in the server process itself (``resource.setrlimit`` before ``logserver`` runs).
"""

from __future__ import annotations

import os
import socket

import pytest
from helpers import rawwire as rw
from helpers.procfs import server_side_queues
from helpers.rawwire import create_topic_v5, fetch_v4_repeated, parse_fetch_v4, produce_each
from helpers.waiting import wait_until

pytestmark = [pytest.mark.timeout(240)]

TOPIC_ALREADY_EXISTS = 36


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def limited(nofile: int) -> tuple[str, ...]:
    """A launcher running ``logserver`` under ``ulimit -n nofile`` (soft and hard)."""
    code = ("import resource, runpy; "
            f"resource.setrlimit(resource.RLIMIT_NOFILE, ({nofile}, {nofile})); "
            "runpy.run_module('logserver', run_name='__main__', alter_sys=True)")
    return ("-c", code)


def _fill(port: int, topic: str, partitions: int, batches: int, size: int) -> None:
    for p in range(partitions):
        produce_each(port, topic, p, [bytes([65 + i % 26]) * size for i in range(batches)])


def _read_all(port: int, topic: str, partitions: int, size: int) -> None:
    """Fetch offset 0 of every partition (its oldest segment) and check the bytes."""
    with rw.Conn(port) as c:
        for p in range(partitions):
            res = c.call(rw.request(rw.API_FETCH, 4, p, fetch_v4_repeated(topic, p, 0, size + 100)))
            assert res is not None
            (_, partition, error, nbytes), = parse_fetch_v4(res[1])
            assert (partition, error) == (p, 0) and nbytes >= size, (p, error, nbytes)


def test_descriptors_per_partition_do_not_grow_with_segments(server_factory):
    """40 partitions of 6 segments each: after a restart the server holds ~3 descriptors
    per partition (was 3 per segment + 2); reading every oldest segment opens them, and a
    retention pass later the idle ones are closed again."""
    settings = {"log.segment.bytes": 2048, "log.retention.check.interval.ms": 300}
    empty = server_factory(settings=settings)
    rw.api_versions_ok(empty.port)
    baseline = open_fds(empty.pid)
    empty.stop()
    server = server_factory(settings=settings)
    assert create_topic_v5(server.port, "segmented", 40)[0] == 0
    _fill(server.port, "segmented", 40, 6, 1500)  # one batch per segment
    assert len(server.segment_files("segmented", 0)) == 6
    server.restart()
    rw.api_versions_ok(server.port)
    after = open_fds(server.pid) - baseline
    print(f"40 partitions x 6 segments: {after} descriptors after restart")
    assert after <= 3 * 40 + 6, f"{after} descriptors for 40 partitions after a restart"
    _read_all(server.port, "segmented", 40, 1500)
    read = open_fds(server.pid) - baseline
    assert read > after  # the oldest segments were opened to be read ...
    wait_until(lambda: open_fds(server.pid) - baseline <= 5 * 40 + 6, timeout=30, what="idle segments to close their files")  # ... and closed once idle
    _read_all(server.port, "segmented", 40, 1500)  # and open again when read


def test_partitions_are_not_bounded_by_the_descriptor_limit(server_factory):
    """Under ulimit -n 400, 300 partitions (was refused beyond 44: 5 descriptors per
    partition) are created, written into 2 segments each, restart under the same limit
    and read back whole: segment files go through the bounded file-handle cache
    (log.file.handles.max lowered to fit the limit), never one descriptor per partition."""
    settings = {"log.segment.bytes": 2048}
    server = server_factory(settings=settings, launcher=limited(400))
    assert create_topic_v5(server.port, "many", 300) == (0, None)
    _write_each(server.port, "many", 300, 2, 1500)
    assert open_fds(server.pid) < 400
    server.restart()
    assert open_fds(server.pid) < 400
    _read_each(server.port, "many", 300, 2, 1500)
    rw.api_versions_ok(server.port)
    assert open_fds(server.pid) < 400
    assert "Too many open files" not in server.output()


def test_a_creation_needs_no_descriptor_per_partition(server_factory):
    """Connections eat the descriptors until ~20 are left; creating 30 partitions still
    succeeds (an empty partition holds no descriptor and makes no file: its directory
    and segment come with its first append, so nothing of it is on disk yet); once the
    connections go, the server restarts with the topic and its partitions take writes."""
    server = server_factory(launcher=limited(400))
    rw.api_versions_ok(server.port)
    hogs: list[socket.socket] = []
    try:
        while (left := 400 - 20 - open_fds(server.pid)) > 0:
            hogs += [socket.create_connection((rw.HOST, server.port))
                     for _ in range(min(left, 10))]
            _wait_accepted(server, len(hogs))
        hogs[0].settimeout(60)
        code = _create_on(hogs[0], "lazy", 30)  # on a held connection: no new descriptor
        assert code == 0, code
    finally:
        for sock in hogs:
            sock.close()
    assert server.data_dir is not None
    assert not [p.name for p in server.data_dir.iterdir() if p.name.startswith("lazy-")]
    server.restart()
    assert create_topic_v5(server.port, "lazy", 30)[0] == TOPIC_ALREADY_EXISTS
    _write_each(server.port, "lazy", 30, 1, 100)
    assert len([p for p in server.data_dir.iterdir() if p.name.startswith("lazy-")]) == 30
    server.restart()
    _read_each(server.port, "lazy", 30, 1, 100)


def test_descriptors_stay_within_the_file_handle_cache(server_factory):
    """log.file.handles.max=64 and 500 partitions of 2 segments each, written, read from
    offset 0 and restarted: the server's descriptors stay within the cache's 64 (beside
    its empty-server baseline and the test's connection), and every record is read back."""
    settings = {"log.segment.bytes": 2048, "log.file.handles.max": 64}
    empty = server_factory(settings=settings)
    rw.api_versions_ok(empty.port)
    baseline = open_fds(empty.pid)
    empty.stop()
    server = server_factory(settings=settings)
    assert create_topic_v5(server.port, "cached", 500) == (0, None)
    bound = baseline + 64 + 4  # + the test's connection and a transient open or two
    _write_each(server.port, "cached", 500, 2, 1500, check=lambda: open_fds(server.pid) <= bound)
    assert open_fds(server.pid) <= bound
    _read_each(server.port, "cached", 500, 2, 1500, check=lambda: open_fds(server.pid) <= bound)
    server.restart()
    assert open_fds(server.pid) <= bound
    _read_each(server.port, "cached", 500, 2, 1500, check=lambda: open_fds(server.pid) <= bound)


def _write_each(port: int, topic: str, partitions: int, batches: int, size: int,
                check=lambda: True) -> None:
    """``batches`` batches of one ``size``-byte record to every partition, on one
    connection; ``check`` holds after every 50 partitions."""
    with rw.Conn(port, timeout=60) as c:
        for p in range(partitions):
            for i in range(batches):
                value = bytes([65 + (p + i) % 26]) * size
                res = c.call(rw.request(rw.API_PRODUCE, 3, i + 1, rw.produce_v3(
                    topic, p, rw.record_batch([(None, value)]))))
                assert res is not None
                assert rw.parse_produce_v3_response(res[1])[(topic, p)][0] == 0
            if p % 50 == 49:
                assert check(), f"descriptor bound broken after {p + 1} partitions"


def _read_each(port: int, topic: str, partitions: int, batches: int, size: int,
               check=lambda: True) -> None:
    """Fetch every batch of every partition by its offset; each holds its record."""
    with rw.Conn(port, timeout=60) as c:
        for p in range(partitions):
            for i in range(batches):
                res = c.call(rw.request(rw.API_FETCH, 4, p, fetch_v4_repeated(topic, p, i, size + 100)))
                assert res is not None
                (_, partition, error, nbytes), = parse_fetch_v4(res[1])
                assert (partition, error) == (p, 0) and nbytes >= size, (p, i, error, nbytes)
                assert bytes([65 + (p + i) % 26]) * size in res[1], (p, i)
            if p % 50 == 49:
                assert check(), f"descriptor bound broken after reading {p + 1} partitions"


def _wait_accepted(server, count: int) -> None:
    wait_until(lambda: len(server_side_queues(server.pid, server.port)) >= count, what="the server to accept the connections", timeout=20.0)


def _create_on(sock: socket.socket, name: str, partitions: int) -> int:
    from kafkaproto import decode_response, encode_request
    from kafkaproto.messages import CreateTopicsRequest

    req = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[],
        configs=[])], timeout_ms=30000, validate_only=False)
    sock.sendall(encode_request(19, 5, 1, "bounded", req))
    head = b""
    while len(head) < 4:
        head += sock.recv(4 - len(head))
    size = int.from_bytes(head, "big")
    body = b""
    while len(body) < size:
        body += sock.recv(size - len(body))
    _, response = decode_response(19, 5, body)
    return response.topics[0].error_code

