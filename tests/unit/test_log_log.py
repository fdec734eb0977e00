"""Log: offsets, multi-segment round trips, rolls, index-driven reads, KIP-74 regions,
timestamps, truncation, retention, flush and clean reopen."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest
from helpers.log_helpers import (
    append,
    make_batch,
    open_descriptors,
    read_records,
    region_bytes,
    segment_files,
    small_config,
)

from kafkaproto.batch import iter_batches, parse_header, verify_crc
from kafkaproto.records import iter_records
from logserver.log import Log, LogConfig, OffsetOutOfRangeError


def test_append_assigns_offsets_and_patches_in_place(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0")
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    buf, header = make_batch(3)
    assert log.append(buf, header) == 0
    buf2, header2 = make_batch(2)
    assert log.append(buf2, header2) == 3
    patched = parse_header(buf2)
    assert patched.base_offset == 3 and patched.partition_leader_epoch == 0
    assert verify_crc(buf2)  # base offset and leader epoch lie outside the CRC
    assert log.log_end_offset == 5 and log.last_append_ms > 0
    data = region_bytes(log.read(0, 1 << 20))
    assert data == bytes(buf) + bytes(buf2)
    assert [r.offset for r in iter_records(data)] == [0, 1, 2, 3, 4]
    log.close()


def test_round_trip_across_segments_and_reads_from_the_middle(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", small_config())
    expected = []
    for i in range(60):
        base = append(log, n=1 + i % 3, ts=10_000 + i * 10, tag=i)
        expected.extend(range(base, base + 1 + i % 3))
    assert len(log.segments) > 5
    assert len(segment_files(tmp_path / "t-0")) == len(log.segments)
    assert [seg.base_offset for seg in log.segments][1:] == [
        prev.next_offset for prev in log.segments[:-1]
    ]
    assert any(seg.offset_index.entries for seg in log.segments)  # indexed, sparse
    records = read_records(log)
    assert [r.offset for r in records] == expected
    # Every offset, read from the middle: the region starts at the batch holding it.
    for offset in range(log.log_end_offset):
        first = parse_header(region_bytes(log.read(offset, 1)))
        assert first.base_offset <= offset <= first.last_offset
    log.close()


def test_read_region_whole_first_batch_and_batch_boundaries(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0")
    sizes = []
    for _ in range(5):
        buf, header = make_batch(4, value_size=100)
        sizes.append(len(buf))
        log.append(buf, header)
    # max_bytes below one batch: still the whole first batch (KIP-74).
    region = log.read(0, 10)
    assert (region.position, region.length) == (0, sizes[0])
    region.release()
    # Reading from inside a batch returns that whole batch.
    region = log.read(6, 10)
    assert (region.position, region.length) == (sizes[0], sizes[1])
    region.release()
    # max_bytes between two and three batches: two whole batches, no partial third.
    region = log.read(0, sizes[0] + sizes[1] + sizes[2] - 1)
    assert region.length == sizes[0] + sizes[1]
    data = region_bytes(region)
    assert [p for p, _ in iter_batches(data)] == [0, sizes[0]]
    # The upper bound (high watermark) cuts at its batch, and nothing at/after it is served.
    region = log.read(0, 1 << 20, upper_bound_offset=12)
    assert region.length == sum(sizes[:3])
    region.release()
    assert log.read(12, 1 << 20, upper_bound_offset=12) is None
    assert log.read(20, 100) is None  # == LEO
    with pytest.raises(OffsetOutOfRangeError):
        log.read(21, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    log.close()


def test_read_region_uses_index_to_jump(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig(index_interval_bytes=0))
    for _ in range(200):
        append(log, n=1)
    seg = log.active_segment
    assert seg.offset_index.entries == 199
    size = len(make_batch()[0])
    region = log.read(0, 100 * size + size - 1)
    length = region.length
    data = region_bytes(region)
    assert length == 100 * size
    assert sum(1 for _ in iter_batches(data)) == 100
    log.close()


def test_roll_by_size_index_full_and_time(tmp_path: Path) -> None:
    size = len(make_batch()[0])
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=4 * size))
    for _ in range(10):
        append(log)
    assert [s.size for s in log.segments] == [4 * size, 4 * size, 2 * size]
    log.close()

    log = Log(tmp_path / "u-0", LogConfig(index_interval_bytes=0, index_max_bytes=24))
    for _ in range(10):
        append(log)
    assert all(s.offset_index.entries <= 3 for s in log.segments)
    assert len(log.segments) == 3  # 4 batches per segment: 3 entries + the unindexed first
    log.close()

    log = Log(tmp_path / "v-0", LogConfig(roll_ms=1000))
    append(log, ts=10_000)
    append(log, ts=10_900)
    assert len(log.segments) == 1
    append(log, ts=11_001)  # more than roll_ms after the segment's first timestamp
    assert len(log.segments) == 2 and log.active_segment.base_offset == 2
    log.close()


def test_roll_by_wall_clock_without_timestamps(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig(roll_ms=1000))
    buf, header = make_batch(1, ts=-1)
    log.append(buf, header, now_ms=log.active_segment.created_ms)
    buf, header = make_batch(1, ts=-1)
    log.append(buf, header, now_ms=log.active_segment.created_ms + 1001)
    assert len(log.segments) == 2
    log.close()


def test_offset_for_timestamp(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", small_config())
    for i in range(30):
        # batch i holds records at 1000*i + 0, 10, 20
        append(log, n=3, ts=1000 * i, ts_step=10)
    assert len(log.segments) > 3
    assert log.offset_for_timestamp(0) == (0, 0)
    assert log.offset_for_timestamp(1) == (1, 10)  # inside a batch: the exact record
    assert log.offset_for_timestamp(15_015) == (47, 15_020)
    assert log.offset_for_timestamp(15_021) == (48, 16_000)
    assert log.offset_for_timestamp(29_020) == (89, 29_020)
    assert log.offset_for_timestamp(29_021) is None
    log.close()
    # The max timestamps survive a clean reopen (final time index entry on close).
    log = Log(tmp_path / "t-0", small_config())
    assert log.offset_for_timestamp(15_015) == (47, 15_020)
    assert log.offset_for_timestamp(29_021) is None
    log.close()


def test_clean_reopen_needs_no_recovery(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = Log(tmp_path / "t-0", small_config())
    for i in range(40):
        append(log, n=2, ts=i, tag=i)
    before = read_records(log)
    leo, nsegs = log.log_end_offset, len(log.segments)
    log.close()
    for path in segment_files(tmp_path / "t-0", ".index"):
        assert path.stat().st_size % 8 == 0 and path.stat().st_size < 4096  # trimmed
    with caplog.at_level(logging.WARNING, logger="logserver.log"):
        log = Log(tmp_path / "t-0", small_config(), recovery_point=0, clean_shutdown=True)
    assert not caplog.records
    assert (log.log_end_offset, len(log.segments)) == (leo, nsegs)
    assert log.recovery_point == leo
    assert read_records(log) == before
    assert append(log, n=1) == leo
    log.close()


def test_truncate_to(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", small_config())
    for _ in range(40):
        append(log, n=2)
    nsegs = len(log.segments)
    assert log.truncate_to(31) == 30  # batch granularity: the batch holding 31 goes
    assert log.log_end_offset == 30 and len(log.segments) < nsegs
    assert [r.offset for r in read_records(log)] == list(range(30))
    assert append(log, n=2) == 30
    assert [r.offset for r in read_records(log)] == list(range(32))
    assert log.truncate_to(0) == 0
    assert log.read(0, 100) is None and len(log.segments) == 1
    log.close()
    assert len(segment_files(tmp_path / "t-0")) == 1


def test_retention(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", small_config(retention_ms=10_000))
    for i in range(40):
        append(log, n=1, ts=1000 * i)
    nsegs = len(log.segments)
    deleted = log.delete_old_segments(now_ms=39_000 + 10_000)
    assert 0 < deleted < nsegs
    assert log.log_start_offset == log.segments[0].base_offset > 0
    assert all(s.max_timestamp >= 29_000 for s in log.segments)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert read_records(log, log.log_start_offset)[-1].offset == 39
    # Everything expired: every closed segment goes, the active one never does
    # (issue 4); it is deleted by a later pass once it has rolled.
    active = log.active_segment
    log.delete_old_segments(now_ms=10**9)
    assert log.segments == [active] and log.log_end_offset == 40
    start = log.log_start_offset
    assert 0 < start < 40
    log.close()
    log = Log(tmp_path / "t-0", small_config())
    assert (log.log_start_offset, log.log_end_offset) == (start, 40)
    log.close()


def test_flush_returns_captured_leo_while_appending(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", small_config())
    assert log.flush() == 0
    append(log, n=3)
    assert log.flush() == 3 == log.recovery_point
    stop = threading.Event()
    points: list[int] = []

    def flusher() -> None:
        while not stop.is_set():
            points.append(log.flush())

    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        for _ in range(300):
            append(log, n=1)
    finally:
        stop.set()
        thread.join()
    assert points == sorted(points) and points[-1] <= log.log_end_offset
    assert log.flush() == log.log_end_offset == 303
    log.close()


def test_read_without_min_one(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0")
    buf, header = make_batch(4, value_size=100)
    log.append(buf, header)
    assert log.read(0, len(buf) - 1, min_one=False) is None  # would not fit: nothing
    assert len(region_bytes(log.read(0, len(buf), min_one=False))) == len(buf)
    log.close()


def test_max_timestamp_offset(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", small_config())
    assert log.max_timestamp_offset() is None
    for i in range(30):
        # batch 17 (offsets 51-53) holds 49_990, 50_000, 50_010: the max, on its last record
        ts = 49_990 if i == 17 else 1000 * i
        append(log, n=3, ts=ts, ts_step=10)
    append(log, n=1, ts=50_010)  # a tie later on: the earliest record wins
    assert len(log.segments) > 3
    assert log.max_timestamp_offset() == (53, 50_010)
    log.close()


def test_log_append_time_with_stale_header(tmp_path: Path) -> None:
    from kafkaproto.batch import set_log_append_time

    log = Log(tmp_path / "t-0")
    buf, header = make_batch(2, ts=1_000)
    set_log_append_time(buf, 0, 99_000)  # header above still says max_timestamp 1_001
    log.append(buf, header)
    assert log.active_segment.max_timestamp == 99_000
    assert log.offset_for_timestamp(2_000) == (0, 99_000)
    assert log.max_timestamp_offset() == (0, 99_000)
    log.close()


def test_retired_segment_fd_stays_readable(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", small_config(retention_ms=1))
    for i in range(20):
        append(log, n=1, ts=i)
    region = log.read(0, 100)
    expected = region.read()
    assert len(expected) == region.length
    first_log = log.segments[0].path
    assert log.delete_old_segments(now_ms=10**6) > 0
    assert not first_log.exists()  # renamed *.deleted at once
    assert region.read() == expected  # a pending sendfile still works
    log.close()
    assert region.read() == expected  # closing the log waits for its readers
    assert open_descriptors(first_log.name) == 1
    region.release()
    assert open_descriptors(first_log.name) == 0  # the last reader closed it
    with pytest.raises(ValueError):
        region.read()


def test_delete_records_inside_a_segment_and_retention_below_the_start(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0")  # a week of retention: only the log start offset deletes
    append(log, n=3)
    append(log, n=2)  # offsets 0-4 in one segment, the active one
    assert log.delete_records(4) == 4  # inside a batch: the start moves, the segment stays
    assert log.log_start_offset == 4 and len(log.segments) == 1
    with pytest.raises(OffsetOutOfRangeError):
        log.read(2, 1 << 20)
    assert [r.offset for r in read_records(log, 4) if r.offset >= 4] == [4]
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(6)  # above the log end offset
    assert log.delete_records(5) == 5  # == LEO: the active segment is kept
    log.roll()
    append(log, n=1)
    assert log.log_start_offset == 5 and len(log.segments) == 2
    assert log.delete_old_segments() == 1  # the rolled segment lies wholly below the start
    assert log.segments[0].base_offset == 5 and log.log_start_offset == 5
    log.close()
    reopened = Log(tmp_path / "t-0", log_start_offset=5)
    assert reopened.log_start_offset == 5 and reopened.log_end_offset == 6
    reopened.close()
