"""Appends written by the writer thread (logserver.log.append_writer), on real files.

Offsets are assigned at once and in order; the bytes are written on the thread, and
``log_end_offset`` (what a fetch and the high watermark see) moves only once they are.
A failed write fails every write queued behind it and leaves the log where the disk is.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.log_helpers import crash, make_batch, read_records, small_config

import logserver.log.segment as segment_module
from logserver.log import Log
from logserver.log.append_writer import AppendWriter
from logserver.log.producer_state import Verdict

LARGE = 300  # value bytes of a batch at or above the writer's threshold
THRESHOLD = 200


@pytest.fixture
def writer() -> Iterator[AppendWriter]:
    w = AppendWriter(THRESHOLD)
    try:
        yield w
    finally:
        w.close()


def _hold(writer: AppendWriter) -> threading.Event:
    """Occupy the writer thread until the returned event is set (a real queued job)."""
    release = threading.Event()
    started = threading.Event()

    def job() -> None:
        started.set()
        release.wait(10)

    writer.submit(job)
    assert started.wait(10)
    return release


def _mixed(log: Log, count: int) -> list[tuple[int, int]]:
    """Append ``count`` batches alternating large and small ones; (base, tag) of each."""
    out = []
    for i in range(count):
        size = LARGE if i % 3 == 0 else 10
        buf, header = make_batch(2, ts=1_000 + i, value_size=size, tag=i)
        out.append((log.append(buf, header), i))
    return out


def test_mixed_appends_keep_their_order_across_rolls_and_restarts(
    tmp_path: Path, writer: AppendWriter
) -> None:
    d = tmp_path / "t-0"
    log = Log(d, small_config(), writer=writer)
    appended = _mixed(log, 40)
    assert [base for base, _ in appended] == list(range(0, 80, 2))
    log.drain_writes()
    assert log.log_end_offset == log.assigned_end_offset == 80
    assert len(log.segments) > 5  # 1000-byte segments: the writer path rolled many times
    records = read_records(log)
    assert [r.offset for r in records] == list(range(80))
    # Record i*2 and i*2+1 belong to batch i: their values carry the batch's tag.
    assert all(r.value[0] == (r.offset // 2 + r.offset % 2) % 256 for r in records)
    log.close()
    reopened = Log(d, small_config(), writer=writer)
    assert read_records(reopened) == records
    crash(reopened)
    recovered = Log(d, small_config(), clean_shutdown=False, writer=writer)
    assert read_records(recovered) == records
    recovered.close()


def test_fetchers_see_a_batch_only_once_it_is_written(tmp_path: Path, writer: AppendWriter) -> None:
    log = Log(tmp_path / "t-0", small_config(segment_bytes=1 << 20), writer=writer)
    release = _hold(writer)
    try:
        buf, header = make_batch(3, value_size=LARGE)
        assert log.append(buf, header) == 0
        # A small batch behind a queued one is queued too (order), at the next offsets.
        small, small_header = make_batch(1, value_size=10, tag=7)
        assert log.append(small, small_header) == 3
        assert log.assigned_end_offset == 4
        assert log.log_end_offset == 0
        assert log.read(0, 1 << 20) is None
        barrier = log.write_barrier()
        assert barrier is not None and not barrier.done()
    finally:
        release.set()
    barrier.result(timeout=10)
    assert log.write_barrier() is None
    assert log.log_end_offset == 4
    assert [r.offset for r in read_records(log)] == [0, 1, 2, 3]
    # Nothing queued any more: a small batch is written at once, on the caller's thread.
    small, small_header = make_batch(1, value_size=10)
    assert log.append(small, small_header) == 4
    assert log.log_end_offset == 5 and log.write_barrier() is None
    log.close()


def test_failed_write_fails_the_queue_behind_it_and_the_log_carries_on(
    tmp_path: Path, writer: AppendWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = Log(tmp_path / "t-0", small_config(segment_bytes=1 << 20), writer=writer)
    real_pwrite = segment_module.pwrite
    failures = [OSError(errno.ENOSPC, "No space left on device")]

    def pwrite(fd: int, data: object, offset: int) -> int:
        if failures:
            raise failures.pop()
        return real_pwrite(fd, data, offset)  # type: ignore[arg-type]

    monkeypatch.setattr(segment_module, "pwrite", pwrite)
    pid, epoch = 4, 0
    release = _hold(writer)
    try:
        first, first_header = make_batch(2, value_size=LARGE, producer_id=pid,
                                         producer_epoch=epoch, base_sequence=0)
        assert log.check_producer(first_header).verdict == Verdict.APPEND
        assert log.append(first, first_header) == 0
        second, second_header = make_batch(1, value_size=10, producer_id=pid,
                                           producer_epoch=epoch, base_sequence=2)
        assert log.check_producer(second_header).verdict == Verdict.APPEND
        assert log.append(second, second_header) == 2
        barrier = log.write_barrier()
        assert barrier is not None
    finally:
        release.set()
    with pytest.raises(OSError, match="earlier write failed"):
        barrier.result(timeout=10)  # the second write refused to leave a gap
    assert log.log_end_offset == 0
    assert log.active_segment.size == 0
    # The producer's retry of the failed batch is appended, not taken for a duplicate.
    retry, retry_header = make_batch(2, value_size=LARGE, producer_id=pid,
                                     producer_epoch=epoch, base_sequence=0)
    assert log.check_producer(retry_header).verdict == Verdict.APPEND
    assert log.append(retry, retry_header) == 0
    done = log.write_barrier()
    assert done is not None
    done.result(timeout=10)
    assert log.log_end_offset == 2
    assert [r.offset for r in read_records(log)] == [0, 1]
    log.close()


def test_close_waits_for_queued_writes(tmp_path: Path, writer: AppendWriter) -> None:
    d = tmp_path / "t-0"
    log = Log(d, small_config(segment_bytes=1 << 20), writer=writer)
    release = _hold(writer)
    buf, header = make_batch(2, value_size=LARGE)
    assert log.append(buf, header) == 0
    assert log.log_end_offset == 0
    closer = threading.Thread(target=log.close)
    closer.start()
    release.set()
    closer.join(10)
    assert not closer.is_alive()
    reopened = Log(d, small_config(segment_bytes=1 << 20))
    assert reopened.log_end_offset == 2
    reopened.close()
