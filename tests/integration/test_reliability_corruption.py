"""Corruption and repair, on a real server's data directory and real files.

Torn tails (truncated batch, garbage after the last batch, zeroed tail) and bad indexes
(truncated, garbage, missing) are repaired by start-up itself, which reports what it did.
A corrupt batch in the middle of a closed segment is refused (exit code 3, a message
naming the file and position, the segment untouched) unless
``log.recovery.allow.data.loss=true`` or ``logserver repair DIR``. ``logserver check``
finds all of it read-only (exit 0 clean, 1 problems, 2 usage).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from helpers.clienthelpers import ck_produce, kp_read
from helpers.serverproc import ServerProcess, ServerStartError, run_cli

pytestmark = [pytest.mark.timeout(180)]

TOPIC = "damage"
SETTINGS = {"log.segment.bytes": 8192, "log.index.interval.bytes": 256, "num.partitions": 1}


def _fill(server: ServerProcess, n: int = 600) -> list[bytes]:
    values = [f"v{i:05d}-".encode() + b"x" * 40 for i in range(n)]
    for start in range(0, n, 20):  # 20 records per produce: many batches, several segments
        ck_produce(server.bootstrap, TOPIC,
                   [{"value": v, "partition": 0} for v in values[start:start + 20]],
                   **{"linger.ms": 0})
    return values


def _values(server: ServerProcess) -> list[bytes]:
    return [r.value for r in sorted(kp_read(server.bootstrap, TOPIC), key=lambda r: r.offset)]


def _segments(server: ServerProcess) -> list[Path]:
    return server.segment_files(TOPIC, 0)


def _batch_starts(path: Path) -> list[int]:
    from kafkaproto.batch import parse_header

    data, pos, starts = path.read_bytes(), 0, []
    while pos < len(data):
        starts.append(pos)
        pos += parse_header(data, pos).size
    return starts


def _check(server: ServerProcess) -> tuple[int, str]:
    result = run_cli(["check", str(server.data_dir)])
    return result.returncode, result.stdout + result.stderr


@pytest.fixture
def filled(server_factory):
    server = server_factory(settings=SETTINGS)
    values = _fill(server)
    assert len(_segments(server)) >= 4
    return server, values


@pytest.mark.parametrize("damage", ["truncated-batch", "garbage-after-last", "zeroed-tail"])
def test_torn_tail_is_cut_at_start_up_and_reported(filled, damage):
    server, values = filled
    server.kill9()
    last = _segments(server)[-1]
    starts = _batch_starts(last)
    size = last.stat().st_size
    from kafkaproto.batch import parse_header

    with open(last, "rb") as f:
        f.seek(starts[-1])
        last_base = parse_header(f.read(61)).base_offset
    if damage == "truncated-batch":
        os.truncate(last, size - 10)  # the last batch loses its end
        kept = values[:last_base]
    elif damage == "garbage-after-last":
        with open(last, "ab") as f:
            f.write(os.urandom(1000))
        kept = values
    else:  # a crash after the file grew but before its data reached the disk: zeros
        with open(last, "r+b") as f:
            f.seek(starts[-1])
            f.write(b"\0" * (size - starts[-1]))
            f.write(b"\0" * 500)
        kept = values[:last_base]
    code, out = _check(server)
    assert code == 1 and "torn tail" in out and "corrupt:" not in out, out
    server.start()
    assert "start-up recovery repaired" in server.output()
    assert "truncated" in server.output()
    assert _values(server) == kept
    assert server.stop() == 0
    code, out = _check(server)
    assert code == 0 and "clean" in out, out


@pytest.mark.parametrize("damage", ["truncated", "garbage", "missing"])
def test_bad_index_of_closed_segment_is_rebuilt(filled, damage):
    server, values = filled
    assert server.stop() == 0  # clean: the indexes are trusted unless they look wrong
    index = _segments(server)[1].with_suffix(".index")
    assert index.stat().st_size >= 16, "the test needs an index with several entries"
    if damage == "truncated":
        os.truncate(index, index.stat().st_size - 3)
    elif damage == "garbage":
        index.write_bytes(os.urandom(index.stat().st_size))
    else:
        index.unlink()
    code, out = _check(server)
    assert code == 1 and "index:" in out and "corrupt:" not in out, out
    server.start()
    assert "rebuilt indexes" in server.output()
    assert _values(server) == values
    # every offset is still found through the rebuilt index
    for offset in (0, 137, 250, len(values) - 1):
        got = kp_read(server.bootstrap, TOPIC, start=offset, end={0: offset + 1})
        assert [r.value for r in got] == [values[offset]]
    assert server.stop() == 0
    assert _check(server)[0] == 0


def _corrupt_middle_of_closed_segment(server: ServerProcess) -> tuple[Path, int]:
    segment = _segments(server)[1]
    starts = _batch_starts(segment)
    position = starts[len(starts) // 2]
    with open(segment, "r+b") as f:  # flip record bytes: the CRC no longer matches
        f.seek(position + 70)
        byte = f.read(1)
        f.seek(position + 70)
        f.write(bytes([byte[0] ^ 0xFF]))
    return segment, position


def test_corrupt_batch_in_closed_segment_refuses_start(filled, tmp_path):
    server, values = filled
    server.kill9()  # unclean: start-up re-validates every segment after the recovery point
    segment, position = _corrupt_middle_of_closed_segment(server)
    before = {p: p.read_bytes() for p in _segments(server)}

    with pytest.raises(ServerStartError) as info:
        server.start()
    message = str(info.value)
    assert "exited with code 3" in message
    assert "refusing to start" in message and str(segment) in message
    assert f"position {position}" in message
    assert {p: p.read_bytes() for p in _segments(server)} == before, "refusal changed the log"

    code, out = _check(server)
    assert code == 1 and "corrupt:" in out and f"position {position}" in out, out

    # explicit opt-in: the repair setting starts it, cutting at the damage
    copy = tmp_path / "copy"
    shutil.copytree(server.data_dir, copy)
    server.settings["log.recovery.allow.data.loss"] = "true"
    server.start()
    recovered = _values(server)
    assert recovered == values[: len(recovered)] and len(recovered) < len(values)
    assert "truncated" in server.output() and "deleted" in server.output()
    assert server.stop() == 0

    # the offline repair does the same to the copy, reports it, and leaves it clean
    result = run_cli(["repair", str(copy)])
    assert result.returncode == 1, result.stdout + result.stderr
    assert "repair did" in result.stdout and "truncated" in result.stdout
    assert "clean after repair" in result.stdout
    assert run_cli(["check", str(copy)]).returncode == 0
    assert run_cli(["repair", str(copy)]).returncode == 0  # nothing left to do


def test_check_finds_corruption_a_clean_start_does_not_read(filled):
    """After a clean stop start-up trusts closed segments (as Kafka does); check reads all."""
    server, _ = filled
    assert server.stop() == 0
    assert _check(server)[0] == 0
    _corrupt_middle_of_closed_segment(server)
    code, out = _check(server)
    assert code == 1 and "CRC mismatch" in out and "start-up will refuse" in out, out


def test_check_usage_errors(tmp_path):
    assert run_cli(["check"]).returncode == 2
    assert run_cli(["check", str(tmp_path / "nope")]).returncode == 2
    assert run_cli(["repair", str(tmp_path / "nope")]).returncode == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run_cli(["check", str(empty)]).returncode == 0


def test_repair_refuses_a_directory_in_use(server):
    result = run_cli(["repair", str(server.data_dir)])
    # a running server's data is clean (exit 0) or, if check sees its live index,
    # repair must not touch it (exit 2)
    assert result.returncode in (0, 2), result.stdout + result.stderr
    if result.returncode == 2:
        assert "in use" in result.stderr


def test_check_reads_every_record_and_names_the_first_unreadable_batch(filled):
    """A CRC-valid batch whose records are garbage: start-up cannot see it (the CRC is
    right), check decodes every batch and says where the first unreadable one is."""
    import struct

    from crc32c import crc32c

    server, _ = filled
    assert server.stop() == 0
    path = _segments(server)[1]
    start = _batch_starts(path)[2]
    data = bytearray(path.read_bytes())
    from kafkaproto.batch import parse_header

    header = parse_header(data, start)
    data[start + 61:start + header.size] = b"\xff" * (header.size - 61)
    struct.pack_into(">I", data, start + 17, crc32c(memoryview(data)[start + 21:start + header.size]))
    path.write_bytes(bytes(data))
    code, out = _check(server)
    assert code == 1, out
    assert "unreadable" in out and f"batch at position {start} (offset {header.base_offset})" in out, out
