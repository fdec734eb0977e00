"""Issue 11, bounded descriptors: a partition costs a few descriptors whatever its number
of segments, ``max.partitions`` follows the descriptor limit, so a server always starts
again on what it created, and a topic creation that fails leaves nothing on disk.

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

POLICY_VIOLATION = 44
KAFKA_STORAGE_ERROR = 56


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


def test_max_partitions_follows_the_descriptor_limit_and_the_server_restarts(server_factory):
    """Under ulimit -n 400, max.partitions is derived (44): a 45th partition is refused
    with POLICY_VIOLATION naming the descriptor limit; 44 partitions of 4 segments each
    (was 14 descriptors each: 616 > 400) restart under the same limit and are readable."""
    settings = {"log.segment.bytes": 2048}
    server = server_factory(settings=settings, launcher=limited(400))
    assert create_topic_v5(server.port, "many", 40)[0] == 0
    code, message = create_topic_v5(server.port, "more", 10)
    assert code == POLICY_VIOLATION and "max.partitions" in (message or "") \
        and "descriptor limit 400" in (message or ""), message
    assert create_topic_v5(server.port, "more", 4)[0] == 0
    _fill(server.port, "many", 40, 4, 1500)
    _fill(server.port, "more", 4, 4, 1500)
    server.restart()
    assert open_fds(server.pid) < 400
    _read_all(server.port, "many", 40, 1500)
    _read_all(server.port, "more", 4, 1500)
    rw.api_versions_ok(server.port)
    assert open_fds(server.pid) < 400
    assert "Too many open files" not in server.output()


def test_a_creation_that_runs_out_of_descriptors_leaves_nothing(server_factory):
    """Connections eat the descriptors until ~20 are left; creating 30 partitions then
    fails half-way (KAFKA_STORAGE_ERROR) and leaves no directory and no topic behind;
    once the connections go, the server restarts and the name can be created."""
    server = server_factory(launcher=limited(400))
    rw.api_versions_ok(server.port)
    hogs: list[socket.socket] = []
    try:
        while (left := 400 - 20 - open_fds(server.pid)) > 0:
            hogs += [socket.create_connection((rw.HOST, server.port))
                     for _ in range(min(left, 10))]
            _wait_accepted(server, len(hogs))
        hogs[0].settimeout(60)
        code = _create_on(hogs[0], "half", 30)  # on a held connection: no new descriptor
        assert code == KAFKA_STORAGE_ERROR, code
    finally:
        for sock in hogs:
            sock.close()
    assert server.data_dir is not None
    assert not [p.name for p in server.data_dir.iterdir() if p.name.startswith("half-")]
    server.restart()
    assert not [p.name for p in server.data_dir.iterdir() if p.name.startswith("half-")]
    assert create_topic_v5(server.port, "half", 30)[0] == 0


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

