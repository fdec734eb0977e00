"""The on-disk aborted-transactions index (``.txnindex``, one per segment), with real
files: written when an abort marker is appended, trusted after a clean stop, rebuilt for
the unflushed tail after an unclean one (and when missing), removed with its segment,
carried over by compaction, cut by truncation, verified by ``logserver check``; and
across a kill -9 of a real server, read_committed confluent-kafka consumers still skip
the aborted records."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer
from helpers.serverproc import run_cli
from helpers.txn_clients import consume_all, create_topics, txn_producer

from kafkaproto.batch import parse_header
from kafkaproto.control import build_marker
from kafkaproto.records import build_batch
from logserver.log.check import check_data_dir
from logserver.log.cleaner import compact
from logserver.log.config import LogConfig
from logserver.log.log import Log
from logserver.log.transaction_index import ENTRY_SIZE, AbortedTxnEntry, parse_entries

T0 = int(time.time() * 1000)


def _data(log: Log, pid: int, seq: int, *, key: bytes | None = None) -> int:
    batch = bytearray(build_batch([(key, b"v", (), T0)], producer_id=pid, producer_epoch=0,
                                  base_sequence=seq, is_transactional=True))
    return log.append(batch, parse_header(batch))


def _plain(log: Log, key: bytes | None = None) -> int:
    batch = bytearray(build_batch([(key, b"p", (), T0)]))
    return log.append(batch, parse_header(batch))


def _marker(log: Log, pid: int, *, commit: bool) -> int:
    batch = bytearray(build_marker(pid, 0, commit=commit, coordinator_epoch=0, timestamp_ms=T0))
    return log.append(batch, parse_header(batch))


def _fill(log: Log) -> list[AbortedTxnEntry]:
    """Two interleaved transactions per segment, one aborted, one committed; three
    segments. Returns the aborted transactions expected."""
    expected = []
    for round_ in range(3):
        a, b = 10 + round_, 20 + round_
        first_a = _data(log, a, 0)
        first_b = _data(log, b, 0)
        _plain(log)
        _data(log, a, 1)
        marker = _marker(log, a, commit=False)  # b still open: the LSO is b's first offset
        expected.append(AbortedTxnEntry(a, first_a, marker, first_b))
        _marker(log, b, commit=True)
        log.roll()
    return expected


def _files(directory: Path) -> dict[int, list[AbortedTxnEntry]]:
    return {int(p.name.split(".")[0]): parse_entries(p.read_bytes())
            for p in sorted(directory.glob("*.txnindex"))}


def _on_disk(directory: Path) -> list[AbortedTxnEntry]:
    return [entry for entries in _files(directory).values() for entry in entries]


def test_abort_markers_are_written_to_the_segment_holding_them(tmp_path):
    log = Log(tmp_path / "t-0")
    try:
        expected = _fill(log)
        files = _files(log.directory)
        assert set(files) == {seg.base_offset for seg in log.segments}  # one per segment
        for seg in log.segments:
            assert all(seg.base_offset <= e.last_offset < seg.next_offset for e in files[seg.base_offset])
        assert _on_disk(log.directory) == expected
        assert log.aborted_txns(0, log.log_end_offset) == expected
        # a range after the first abort: only the later ones (Kafka's collectAbortedTxns)
        assert log.aborted_txns(expected[0].last_offset + 1, log.log_end_offset) == expected[1:]
        assert log.last_stable_offset(log.log_end_offset) == log.log_end_offset
        _data(log, 99, 0)
        assert log.last_stable_offset(log.log_end_offset) == log.log_end_offset - 1
    finally:
        log.close()


def test_clean_reopen_reads_the_files_and_the_snapshot(tmp_path):
    directory = tmp_path / "t-0"
    log = Log(directory)
    expected = _fill(log)
    open_first = _data(log, 77, 0)  # an open transaction survives in the producer snapshot
    log.close()
    before = {p: p.stat().st_mtime_ns for p in directory.glob("*.txnindex")}
    log = Log(directory)
    try:
        assert log.recovery_actions == []
        assert {p: p.stat().st_mtime_ns for p in directory.glob("*.txnindex")} == before
        assert log.aborted_txns(0, log.log_end_offset) == expected
        assert log.ongoing_txns() == {77: open_first}
        assert log.last_stable_offset(log.log_end_offset) == open_first
    finally:
        log.close()


def test_unclean_reopen_rebuilds_the_unflushed_tail_only(tmp_path):
    directory = tmp_path / "t-0"
    log = Log(directory)
    expected = _fill(log)
    flushed_to = log.segments[-2].base_offset  # the last rolled segment was never flushed
    log.close()
    segments = sorted(directory.glob("*.txnindex"))
    kept, rebuilt = segments[0], segments[-2]
    kept_mtime = kept.stat().st_mtime_ns
    rebuilt.write_bytes(b"")  # what the unflushed tail lost
    log = Log(directory, recovery_point=flushed_to, clean_shutdown=False)
    try:
        assert _on_disk(directory) == expected
        assert kept.stat().st_mtime_ns == kept_mtime  # trusted: not rewritten
        assert log.aborted_txns(0, log.log_end_offset) == expected
    finally:
        log.close()
    assert not check_data_dir_problems(tmp_path, "t", directory)


def check_data_dir_problems(data_dir: Path, topic: str, directory: Path) -> list[str]:
    (data_dir / "__topics.json").write_text(json.dumps({"version": 1, "topics": {
        topic: {"topic_id": str(uuid.uuid4()), "partitions": 1}}}), "utf-8")
    return [str(p) for p in check_data_dir(data_dir).problems if p.path.parent == directory]


def test_missing_or_damaged_files_are_rebuilt_and_reported_by_check(tmp_path):
    directory = tmp_path / "t-0"
    log = Log(directory)
    expected = _fill(log)
    log.close()
    files = sorted(directory.glob("*.txnindex"))
    files[0].unlink()  # as a data directory from before the index existed
    files[1].write_bytes(files[1].read_bytes()[:-3])  # a torn entry
    problems = check_data_dir_problems(tmp_path, "t", directory)
    assert len(problems) == 2 and all(p.startswith("index:") for p in problems), problems
    assert "missing" in problems[0] and f"multiple of {ENTRY_SIZE}" in problems[1]
    log = Log(directory)
    try:
        assert sum("rebuilt transaction index" in a for a in log.recovery_actions) == 2
        assert _on_disk(directory) == expected
    finally:
        log.close()
    assert check_data_dir_problems(tmp_path, "t", directory) == []


def test_check_finds_a_wrong_entry(tmp_path):
    directory = tmp_path / "t-0"
    log = Log(directory)
    expected = _fill(log)
    log.close()
    path = sorted(directory.glob("*.txnindex"))[1]
    wrong = expected[1]._replace(first_offset=expected[1].first_offset + 1)
    path.write_bytes(path.read_bytes()[:2] + wrong.producer_id.to_bytes(8, "big")
                     + wrong.first_offset.to_bytes(8, "big") + path.read_bytes()[18:])
    problems = check_data_dir_problems(tmp_path, "t", directory)
    assert len(problems) == 1 and "entry 0" in problems[0], problems


def test_retention_truncation_and_compaction(tmp_path):
    directory = tmp_path / "t-0"
    log = Log(directory, LogConfig())
    try:
        expected = _fill(log)
        # retention: the first segment's files go with it (renamed .deleted, then removed)
        first = log.segments[0].base_offset
        assert log.delete_segments_below(log.segments[1].base_offset) == 1
        assert not (directory / f"{first:020d}.txnindex").exists()
        assert log.aborted_txns(log.log_start_offset, log.log_end_offset) == expected[1:]
        # truncation inside the last full segment drops its abort entry
        last = expected[-1]
        log.truncate_to(last.last_offset)
        assert log.aborted_txns(log.log_start_offset, log.log_end_offset) == expected[1:2]
        assert _on_disk(directory) == expected[1:2]
        assert log.ongoing_txns() == {last.producer_id: last.first_offset,
                                      20 + 2: last.last_stable_offset}
    finally:
        log.close()
    assert check_data_dir_problems(tmp_path, "t", directory) == []


def test_compaction_keeps_the_index_of_the_segment_it_rewrites(tmp_path):
    directory = tmp_path / "t-0"
    log = Log(directory)
    try:
        for key in (b"k1", b"k2", b"k1", b"k2"):
            _plain(log, key)  # superseded records: the cleaner rewrites this segment
        first = _data(log, 5, 0, key=b"x")
        marker = _marker(log, 5, commit=False)
        log.roll()
        _plain(log, b"k1")
        log.roll()
        seg = log.segments[0]
        assert compact(log, delete_retention_ms=0) > 0
        assert log.segments[0] is not seg  # rewritten
        assert _files(directory)[0] == [AbortedTxnEntry(5, first, marker, marker + 1)]
        assert log.aborted_txns(0, log.log_end_offset) == [AbortedTxnEntry(5, first, marker, marker + 1)]
    finally:
        log.close()
    assert check_data_dir_problems(tmp_path, "t", directory) == []


def test_kill9_then_read_committed_consumers_still_skip_aborted_records(server_factory, topic_name):
    server = server_factory(settings={"log.segment.bytes": 4096})
    create_topics(server, topic_name, partitions=1)
    producer = txn_producer(server, f"tx-{topic_name}")
    committed: list[bytes] = []
    for round_ in range(4):
        producer.begin_transaction()
        for i in range(20):
            producer.produce(topic_name, value=f"c{round_}-{i}".encode() * 60)
        producer.commit_transaction(15)
        committed += [f"c{round_}-{i}".encode() * 60 for i in range(20)]
        producer.begin_transaction()
        for i in range(20):
            producer.produce(topic_name, value=f"a{round_}-{i}".encode())
        producer.flush(10)
        producer.abort_transaction(15)
        if round_ == 1:
            server.restart(clean=False)  # kill -9 mid-way: later rounds go to a recovered log
            producer = txn_producer(server, f"tx-{topic_name}")
    plain = Producer({"bootstrap.servers": server.bootstrap})
    plain.produce(topic_name, value=b"plain")
    plain.flush(10)
    committed.append(b"plain")
    assert sorted(consume_all(server, topic_name, "read_committed", quiet_s=1.0)) == sorted(committed)
    server.restart(clean=False)  # again, after the aborts: the tail's index is rebuilt
    assert sorted(consume_all(server, topic_name, "read_committed", quiet_s=1.0)) == sorted(committed)
    assert len(consume_all(server, topic_name, "read_uncommitted", expected=161)) == 161
    server.stop()
    directory = server.partition_dir(topic_name, 0)
    entries = _on_disk(directory)
    assert len(entries) == 4 and len(list(directory.glob("*.txnindex"))) > 3
    result = run_cli(["check", str(server.data_dir)])
    assert result.returncode == 0, result.stdout + result.stderr
    server.start()
    assert sorted(consume_all(server, topic_name, "read_committed", quiet_s=1.0)) == sorted(committed)


def test_a_data_directory_from_before_the_index_is_rebuilt_once(tmp_path, caplog):
    """No .txnindex files and version 1 producer snapshots (no open transactions): the
    first start replays the log and writes both; the next one reads them."""
    import struct
    import zlib

    directory = tmp_path / "t-0"
    log = Log(directory)
    expected = _fill(log)
    open_first = _data(log, 77, 0)
    log.close()
    for path in directory.glob("*.snapshot"):
        data = path.read_bytes()
        magic, _, _, count = struct.unpack_from(">4sHII", data)
        body = data[14:]
        # version 1: the same producers, without the open-transactions trailer
        trailer = 4 + 16 * struct.unpack_from(">I", body, _producers_end(body, count))[0]
        old = body[:len(body) - trailer]
        path.write_bytes(struct.pack(">4sHII", magic, 1, zlib.crc32(old), count) + old)
    caplog.set_level("INFO", logger="logserver.log.producer_state")
    log = Log(directory)  # old snapshots only: passed over, the log is replayed
    try:
        assert "snapshot of an older format" in caplog.text
        assert log.recovery_actions == []
        assert log.ongoing_txns() == {77: open_first}
    finally:
        log.close()
    for path in directory.glob("*.txnindex"):
        path.unlink()
    log = Log(directory)
    try:
        assert sum("rebuilt transaction index" in a for a in log.recovery_actions) == len(log.segments)
        assert log.aborted_txns(0, log.log_end_offset) == expected
        assert log.ongoing_txns() == {77: open_first}
    finally:
        log.close()
    log = Log(directory)
    try:
        assert log.recovery_actions == []
        assert log.ongoing_txns() == {77: open_first}
    finally:
        log.close()
    assert _on_disk(directory) == expected


def _producers_end(body: bytes, count: int) -> int:
    """Where a snapshot body's producer entries end (23-byte producer, 32-byte batches)."""
    import struct

    pos = 0
    for _ in range(count):
        batches = struct.unpack_from(">qhBqi", body, pos)[2]
        pos += 23 + 32 * batches
    return pos
