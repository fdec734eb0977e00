"""LocalLog and segment lifetimes: slices pin their segment, deleted files are renamed and
removed after file.delete.delay.ms, replace/delete-below keep readers safe; the cleaner's
bounded offset map gives the same result in several passes as in one."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from helpers.log_helpers import (
    append,
    make_batch,
    open_descriptors,
    read_records,
    region_bytes,
    small_config,
)
from helpers.waiting import wait_until

from kafkaproto.batch import iter_batches, parse_header
from kafkaproto.records import Record, build_batch, iter_records
from logserver.log import Log
from logserver.log.cleaner import Cleaner
from logserver.log.deleter import FileDeleter
from logserver.log.local_log import SegmentsChangedError
from logserver.log.offset_map import ENTRY_BYTES, OffsetMap


def all_records(log: Log) -> list[Record]:
    """Every record to the log end, batch by batch (compaction leaves empty batches)."""
    out: list[Record] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = region_bytes(log.read(offset, 1 << 20))
        for _, header in iter_batches(data):
            offset = header.next_offset
        out.extend(r for r in iter_records(data) if r.offset >= log.log_start_offset)
    return out


@pytest.fixture
def deleter():
    d = FileDeleter("test-deleter")
    yield d
    d.close()


def test_local_log_append_roll_read_and_delete_below(tmp_path: Path, deleter: FileDeleter) -> None:
    log = Log(tmp_path / "t-0", small_config(segment_bytes=400, file_delete_delay_ms=0),
              deleter=deleter)
    local = log.local
    for i in range(30):
        append(log, n=2, tag=i)
    segments = local.segments
    assert len(segments) > 3 and segments[-1] is local.active_segment
    assert local.log_end_offset == 60 and local.log_start_offset == 0
    boundary = segments[2].base_offset
    assert log.delete_segments_below(boundary + 1) == 2  # segment 2 holds boundary+1: kept
    assert local.log_start_offset == boundary
    assert [r.offset for r in read_records(log, boundary)] == list(range(boundary, 60))
    # never the active segment, even when asked for everything
    log.delete_segments_below(60)
    assert local.segments == (local.active_segment,)
    assert local.log_start_offset == local.active_segment.base_offset
    wait_until(lambda: not list((tmp_path / "t-0").glob("*.deleted")), timeout=10.0)
    log.close()


def test_slice_outlives_retention_and_files_vanish_after_the_delay(
    tmp_path: Path, deleter: FileDeleter
) -> None:
    log = Log(tmp_path / "t-0", small_config(retention_ms=1, file_delete_delay_ms=300),
              deleter=deleter)
    for i in range(20):
        append(log, n=1, ts=i, tag=i)
    region = log.read(0, 1 << 20)
    expected = region.read()
    first = log.segments[0]
    name = str(first.path)  # matched in /proc/self/fd links
    assert log.delete_old_segments(now_ms=10**6) > 0
    deleted = Path(name + ".deleted")
    assert deleted.exists() and not Path(name).exists()
    assert region.read() == expected and first.readers == 1
    wait_until(lambda: not deleted.exists(), timeout=10.0)  # gone after file.delete.delay.ms...
    assert region.read() == expected  # ...while the pinned descriptor still reads it
    assert open_descriptors(name) == 1
    region.release()
    assert open_descriptors(name) == 0 and not first.is_open
    region.release()  # idempotent
    log.close()


def test_replace_segments_swaps_and_refuses_stale_segments(
    tmp_path: Path, deleter: FileDeleter
) -> None:
    log = Log(tmp_path / "t-0", small_config(file_delete_delay_ms=0), deleter=deleter)
    for i in range(30):
        append(log, n=2, tag=i)
    before = all_records(log)
    region = log.read(0, 1 << 20)
    old_bytes = region.read()
    victim = log.segments[0]
    # Compact everything (keys repeat: k0, k1 in every batch), which swaps closed segments.
    assert Cleaner().clean(log, delete_retention_ms=10**9, now_ms=10**6) > 0
    assert log.segments[0] is not victim and not victim.path.name.endswith(".log")
    assert region.read() == old_bytes  # the reader keeps the pre-swap bytes
    region.release()
    after = all_records(log)
    assert {r.key: r.value for r in after} == {r.key: r.value for r in before}
    assert [r.offset for r in after] == sorted(r.offset for r in after)
    # A swap built from a segment that is no longer in the log changes nothing.
    current = log.segments[0]
    with pytest.raises(SegmentsChangedError):
        log.local.replace_segments([victim], [current])
    assert log.segments[0] is current
    log.close()


def test_readers_during_concurrent_retention_never_see_other_bytes(
    tmp_path: Path, deleter: FileDeleter
) -> None:
    log = Log(tmp_path / "t-0", small_config(retention_bytes=3000, file_delete_delay_ms=0),
              deleter=deleter)
    stop = threading.Event()
    errors: list[BaseException] = []

    def retention() -> None:
        try:
            while not stop.is_set():
                log.delete_old_segments()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=retention)
    thread.start()
    try:
        for i in range(400):
            append(log, n=1, tag=i % 256)
            try:
                region = log.read(log.log_start_offset, 1 << 20)
            except Exception:  # the start moved between the two calls
                continue
            if region is None:
                continue
            for record in iter_records(region_bytes(region)):
                assert record.value == bytes([(record.offset % 400) % 256]) * 10
    finally:
        stop.set()
        thread.join()
    assert not errors
    log.close()


def test_offset_map_is_bounded() -> None:
    small = OffsetMap(3 * ENTRY_BYTES)
    assert small.capacity == 3
    for i in range(3):
        small.put(b"k%d" % i, i)
    assert not small.has_room_for(1) and small.get(b"k1") == 1 and small.get(b"zz") == -1
    small.put(b"k1", 7)
    assert small.get(b"k1") == 7 and small.latest_offset == 7 and len(small) == 3


def _keyed_log(directory: Path, deleter: FileDeleter) -> tuple[Log, dict[bytes, bytes | None]]:
    log = Log(directory, small_config(segment_bytes=400, file_delete_delay_ms=0), deleter=deleter)
    latest: dict[bytes, bytes | None] = {}
    for round_ in range(12):
        records = []
        for k in range(7):
            key = b"key%d" % ((k * 3 + round_) % 11)
            value = None if (round_ == 5 and k == 2) else b"r%d-%d" % (round_, k)
            records.append((key, value, [], 1_000 + round_))
            latest[key] = value
        buf = bytearray(build_batch(records))
        log.append(buf, parse_header(buf))
    return log, latest


def test_small_offset_map_gives_the_same_result_over_several_passes(
    tmp_path: Path, deleter: FileDeleter
) -> None:
    big_log, expected = _keyed_log(tmp_path / "big-0", deleter)
    small_log, _ = _keyed_log(tmp_path / "small-0", deleter)
    assert len(small_log.segments) > 3
    size_before = small_log.size_bytes
    big = Cleaner()
    small = Cleaner(dedupe_buffer_bytes=8 * ENTRY_BYTES)  # 8 keys: 11 distinct exist
    big.clean(big_log, delete_retention_ms=10**9, now_ms=10**6)
    small.clean(small_log, delete_retention_ms=10**9, now_ms=10**6)
    assert small.passes > 1 and big.passes == 1
    for log in (big_log, small_log):
        seen: dict[bytes, bytes | None] = {}
        closed_end = log.active_segment.base_offset
        keys_in_closed: list[bytes] = []
        for record in all_records(log):
            seen[record.key] = record.value
            if record.offset < closed_end:
                keys_in_closed.append(record.key)
        assert seen == expected
        # every key at most once in the cleaned (closed) part, unless the active segment
        # holds a later record of it (the active segment is never rewritten)
        assert len(keys_in_closed) == len(set(keys_in_closed))
    assert small_log.size_bytes < 0.6 * size_before
    big_log.close()
    small_log.close()


def test_bad_batch_is_kept_and_counted(tmp_path: Path, deleter: FileDeleter) -> None:
    log = Log(tmp_path / "t-0", small_config(segment_bytes=400, file_delete_delay_ms=0),
              deleter=deleter)
    for i in range(6):
        append(log, n=2, tag=i)
    # Damage the records (not the header) of the first batch on disk: it no longer decodes.
    first = log.segments[0]
    size = len(make_batch(2)[0])
    with open(first.path, "r+b") as f:
        f.seek(size - 6)
        f.write(b"\xff\xff\xff\xff\xff\xff")
    cleaner = Cleaner()
    cleaner.clean(log, delete_retention_ms=10**9, now_ms=10**6)
    assert cleaner.bad_batches >= 1
    region = log.read(0, 1)
    with region:
        assert len(region.read()) == size  # kept, byte for byte as it was
    log.close()
