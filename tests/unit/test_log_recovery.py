"""Recovery after simulated crashes: torn tails, garbage, zeroed regions, bad CRCs,
missing/garbage/untrimmed indexes; each repaired with exactly the right truncation."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from helpers.log_helpers import append, crash, make_batch, read_records, segment_files, small_config

from logserver.log import Log


def _build(directory: Path, batches: int = 30) -> tuple[Log, list[int]]:
    """A multi-segment log of 2-record batches; returns the log and the batch sizes."""
    log = Log(directory, small_config())
    sizes = []
    for i in range(batches):
        buf, header = make_batch(2, ts=1000 + i, tag=i)
        sizes.append(len(buf))
        log.append(buf, header)
    return log, sizes


def _reopen_unclean(directory: Path, recovery_point: int = 0) -> Log:
    return Log(directory, small_config(), recovery_point=recovery_point, clean_shutdown=False)


def _warnings(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)


def test_unclean_reopen_of_intact_log_keeps_everything(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, _ = _build(d)
    before = read_records(log)
    crash(log)  # indexes left preallocated, no snapshot
    log = _reopen_unclean(d)
    assert log.log_end_offset == 60
    assert read_records(log) == before
    log.close()


def test_torn_tail_batch_is_truncated(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "t-0"
    log, sizes = _build(d)
    last = log.active_segment
    last_path, last_size = last.path, last.size
    crash(log)
    os.truncate(last_path, last_size - 7)  # the final write was cut short
    with caplog.at_level(logging.WARNING, logger="logserver.log"):
        log = _reopen_unclean(d)
    assert log.log_end_offset == 58  # the whole torn batch is gone, nothing else
    assert log.active_segment.size == last_size - sizes[-1]
    assert f"truncating {sizes[-1] - 7} bytes" in _warnings(caplog)
    assert [r.offset for r in read_records(log)] == list(range(58))
    assert append(log, n=1) == 58
    log.close()


def test_garbage_after_last_batch(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "t-0"
    log, _ = _build(d)
    last_path, last_size = log.active_segment.path, log.active_segment.size
    crash(log)
    with open(last_path, "ab") as f:
        f.write(os.urandom(333))
    with caplog.at_level(logging.WARNING, logger="logserver.log"):
        log = _reopen_unclean(d)
    assert log.log_end_offset == 60 and log.active_segment.size == last_size
    assert "truncating 333 bytes" in _warnings(caplog)
    log.close()


def test_zeroed_region_truncates_there_and_drops_later_segments(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    d = tmp_path / "t-0"
    log, _ = _build(d)
    victim = log.segments[2]
    # Zero a region starting inside victim's second batch (its records: CRC breaks).
    positions = [pos for pos, _ in victim.iter_headers()]
    bad_offset = victim.base_offset + 2  # 2 records per batch
    path, cut = victim.path, positions[1]
    later = [s.path for s in log.segments[3:]]
    crash(log)
    with open(path, "r+b") as f:
        f.seek(cut + 70)
        f.write(b"\0" * 40)
    with caplog.at_level(logging.WARNING, logger="logserver.log"):
        log = _reopen_unclean(d)
    assert log.log_end_offset == bad_offset
    assert log.active_segment.path == path and log.active_segment.size == cut
    assert not any(p.exists() for p in later)
    assert "CRC mismatch" in _warnings(caplog)
    assert [r.offset for r in read_records(log)] == list(range(bad_offset))
    log.close()


def test_zeroed_header_region(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, _ = _build(d, batches=5)
    size = log.active_segment.size
    path = log.active_segment.path
    sizes = [len(make_batch(2, tag=i)[0]) for i in range(5)]
    crash(log)
    with open(path, "r+b") as f:  # zero the header of batch 3
        f.seek(sum(sizes[:3]))
        f.write(b"\0" * 61)
    log = _reopen_unclean(d)
    assert log.log_end_offset == 6 and log.active_segment.size == sum(sizes[:3]) < size
    log.close()


def test_recovery_starts_at_the_recovery_point(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, _ = _build(d, batches=60)
    log.flush()
    rp_segment = log.segments[3]
    first = log.segments[0]
    first_path = first.path
    crash(log)
    # Damage inside a segment below the recovery point: trusted, not re-validated by CRC.
    with open(first_path, "r+b") as f:
        f.seek(70)
        f.write(b"\xff")
    log = _reopen_unclean(d, recovery_point=rp_segment.base_offset + 1)
    assert log.log_end_offset == 120
    log.close()
    # With recovery point 0 the same damage is found and truncated.
    log = _reopen_unclean(d, recovery_point=0)
    assert log.log_end_offset == 0 and len(log.segments) == 1
    log.close()


def test_missing_index_is_rebuilt(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "t-0"
    log, _ = _build(d)
    before = read_records(log)
    old_index = log.segments[1].offset_index.path
    log.close()
    entries_before = old_index.stat().st_size
    old_index.unlink()
    (d / old_index.name.replace(".index", ".timeindex")).unlink()
    with caplog.at_level(logging.WARNING, logger="logserver.log"):
        log = Log(d, small_config())
    assert "is missing" in _warnings(caplog)
    assert old_index.stat().st_size == entries_before  # rebuilt identically
    assert log.log_end_offset == 60 and read_records(log) == before
    assert log.offset_for_timestamp(1015) == (29, 1015)  # batch 14 holds 1014, 1015
    log.close()


def test_garbage_index_is_rebuilt(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "t-0"
    log, _ = _build(d)
    before = read_records(log)
    index_path = log.segments[1].offset_index.path
    log.close()
    good = index_path.read_bytes()
    index_path.write_bytes(b"\x7f\x00\x13\x37" * 8)
    with caplog.at_level(logging.WARNING, logger="logserver.log"):
        log = Log(d, small_config())
    assert "rebuilding indexes" in _warnings(caplog)
    assert read_records(log) == before
    log.close()
    assert index_path.read_bytes() == good


def test_untrimmed_index_is_rebuilt(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "t-0"
    log, _ = _build(d)
    index_path = log.segments[1].offset_index.path
    log.close()
    good = index_path.read_bytes()
    with open(index_path, "ab") as f:  # as if preallocated and never trimmed
        f.truncate(4096)
    with caplog.at_level(logging.WARNING, logger="logserver.log"):
        log = Log(d, small_config())
    assert "not increasing" in _warnings(caplog)
    assert index_path.read_bytes() == good
    assert log.log_end_offset == 60
    log.close()


def test_crash_with_untrimmed_active_index(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = Log(d, small_config(segment_bytes=10**6))
    for _ in range(50):
        append(log, n=2)
    index_path = log.active_segment.offset_index.path
    crash(log)
    assert index_path.stat().st_size == 4096  # still preallocated
    log = _reopen_unclean(d)
    assert log.log_end_offset == 100
    assert all(log.read(o, 1) is not None for o in range(100))
    log.close()
    assert index_path.stat().st_size < 4096


def test_orphan_index_and_tmp_files_removed(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, _ = _build(d, batches=3)
    log.close()
    (d / "00000000000000009999.index").write_bytes(b"x" * 8)
    (d / "00000000000000000000.snapshot.tmp").write_bytes(b"junk")
    log = Log(d, small_config())
    assert not (d / "00000000000000009999.index").exists()
    assert not (d / "00000000000000000000.snapshot.tmp").exists()
    assert len(segment_files(d)) == len(log.segments)
    log.close()


def test_first_flush_after_recovery_syncs_recovered_segments(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, _ = _build(d)
    crash(log)
    log = _reopen_unclean(d, recovery_point=0)
    unflushed, dir_dirty = log.unflushed()
    assert set(unflushed) == set(log.segments) and dir_dirty
    assert log.recovery_point == 0
    assert log.flush() == 60 and log.unflushed() == ([], False)
    log.close()


def test_empty_segment_in_the_middle_is_dropped(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, _ = _build(d)
    middle = log.segments[1].base_offset
    log.close()
    (d / f"{middle + 1:020d}.log").write_bytes(b"")  # stray empty segment file
    log = Log(d, small_config())
    assert log.log_end_offset == 60
    assert [r.offset for r in read_records(log)] == list(range(60))
    assert not (d / f"{middle + 1:020d}.log").exists()
    log.close()
