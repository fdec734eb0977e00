"""Disk full, through the test-only launcher (``python -m tests.helpers.faults.faulty_server
--enospc-flag PATH``): while the flag file exists every segment write is a short write
followed by ENOSPC.

Produce gets KAFKA_STORAGE_ERROR (56), fetch keeps serving what is there, the partial
write is cut off again (the segment still ends at a batch boundary, every CRC valid),
and once space is back (flag removed) appends continue at the next offset.
"""

from __future__ import annotations

import pytest
from helpers.clienthelpers import kp_read
from helpers.faults import faulty_server
from helpers.rawwire import Conn, parse_produce_v3_response, produce_v3, record_batch, request
from helpers.serverproc import run_cli

from kafkaproto import decode_response, encode_request
from kafkaproto.messages import CreateTopicsRequest

pytestmark = [pytest.mark.timeout(120)]

KAFKA_STORAGE_ERROR = 56


def _produce(c: Conn, corr: int, value: bytes) -> tuple[int, int]:
    res = c.call(request(0, 3, corr, produce_v3("full", 0, record_batch([(None, value)]))))
    assert res is not None, "the server closed the connection"
    return parse_produce_v3_response(res[1])[("full", 0)]


def _create_topic(c: Conn, name: str) -> None:
    """CreateTopics v5 of one single-partition topic; it must succeed."""
    req = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=5000, validate_only=False)
    c.send(encode_request(19, 5, 1, "t", req))
    assert decode_response(19, 5, c.recv_frame())[1].topics[0].error_code == 0


@pytest.mark.parametrize("durability", [
    {}, {"log.flush.interval.messages": 1},
    {"log.writer.thread.min.bytes": 0, "log.flush.interval.messages": 1},
], ids=["ack-after-write", "fsync-every-append", "writer-thread"])
def test_disk_full_then_space_back(server_factory, tmp_path, durability):
    flag = tmp_path / "disk-full"
    server = server_factory(settings=durability, launcher=faulty_server.launcher(enospc_flag=flag))
    assert "TEST FAULT INJECTION ACTIVE" in server.output()
    with Conn(server.port) as c:
        _create_topic(c, "full")
        for i in range(20):
            assert _produce(c, 10 + i, b"before-%d" % i) == (0, i)
        segment = server.segment_files("full", 0)[-1]
        size = segment.stat().st_size

        flag.touch()  # the disk is full
        for i in range(5):
            error, _ = _produce(c, 100 + i, b"while-full-%d" % i)
            assert error == KAFKA_STORAGE_ERROR
        assert segment.stat().st_size == size, "a partial write was left in the segment"
        # fetch keeps serving everything written before
        assert [r.value for r in kp_read(server.bootstrap, "full")] == [
            b"before-%d" % i for i in range(20)]

        flag.unlink()  # space is back
        assert _produce(c, 200, b"after") == (0, 20)
    assert [r.value for r in kp_read(server.bootstrap, "full")][-2:] == [b"before-19", b"after"]
    assert "KAFKA_STORAGE_ERROR" in server.output() or "No space left" in server.output()
    assert server.stop() == 0
    result = run_cli(["check", str(server.data_dir)])
    assert result.returncode == 0, result.stdout


def test_a_production_server_cannot_switch_faults_on(server_factory, tmp_path):
    """The old switch, an environment variable, names no setting: the server warns about
    it by name and ignores it, so the disk-full fault it asks for never happens."""
    flag = tmp_path / "disk-full"
    flag.touch()  # the fault's trigger is present from the start
    server = server_factory(env={"LOGSERVER_TEST_FAULTS": f"enospc_flag={flag}"})
    with Conn(server.port) as c:
        _create_topic(c, "full")
        for i in range(5):
            assert _produce(c, 10 + i, b"written-%d" % i) == (0, i)
    assert [r.value for r in kp_read(server.bootstrap, "full")] == [
        b"written-%d" % i for i in range(5)]
    out = server.output()
    warned = [line for line in out.splitlines() if "LOGSERVER_TEST_FAULTS" in line]
    assert len(warned) == 1 and "WARNING" in warned[0] and "ignoring" in warned[0], out
    assert "TEST FAULT INJECTION ACTIVE" not in out
    assert "KAFKA_STORAGE_ERROR" not in out and "No space left" not in out, out
    assert flag.exists()
    assert server.stop() == 0
    assert run_cli(["check", str(server.data_dir)]).returncode == 0
