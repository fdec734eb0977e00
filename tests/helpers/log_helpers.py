"""Shared helpers for the log tests (tests/unit/test_log_*.py): batches, small configs, crashes."""

from __future__ import annotations

import os
from pathlib import Path

from kafkaproto.batch import BatchHeader, parse_header
from kafkaproto.records import Record, build_batch, iter_records
from logserver.log import Log, LogConfig
from logserver.log.slice import SegmentSlice


def make_batch(
    n: int = 1,
    ts: int = 1_000,
    *,
    value_size: int = 10,
    tag: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    ts_step: int = 1,
) -> tuple[bytearray, BatchHeader]:
    """A producer-style batch of ``n`` records with timestamps ts, ts+ts_step, ..."""
    records = [
        (b"k%d" % i, bytes([(tag + i) % 256]) * value_size, [], ts + i * ts_step) for i in range(n)
    ]
    buf = bytearray(
        build_batch(
            records,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
        )
    )
    return buf, parse_header(buf)


def append(log: Log, n: int = 1, ts: int = 1_000, **kw: int) -> int:
    buf, header = make_batch(n, ts, **kw)
    return log.append(buf, header)


def region_bytes(region: SegmentSlice | None) -> bytes:
    """The slice's bytes; releases it (as the network layer does once it has sent them)."""
    if region is None:
        return b""
    with region:
        data = region.read()
    assert len(data) == region.length
    return data


def read_records(log: Log, start: int = 0, max_bytes: int = 1 << 20) -> list[Record]:
    """Every record from ``start`` to the LEO, fetched the way a consumer would."""
    out: list[Record] = []
    offset = start
    while offset < log.log_end_offset:
        region = log.read(offset, max_bytes)
        assert region is not None, offset
        got = [r for r in iter_records(region_bytes(region)) if r.offset >= offset]
        assert got, offset
        out.extend(got)
        offset = got[-1].offset + 1
    return out


def small_config(**kw: int) -> LogConfig:
    values = {"segment_bytes": 1000, "index_interval_bytes": 100, "index_max_bytes": 4096}
    values.update(kw)
    return LogConfig(**values)


def crash(log: Log) -> None:
    """Drop a Log as kill -9 would: no trim, no snapshot, no flush; only release fds."""
    for seg in log.segments:
        for index in (seg.offset_index, seg.time_index):
            if index._mmap is not None:
                index._mmap.close()
            index._release_fd()
        if seg._fd >= 0:
            os.close(seg._fd)
        seg._fd = -1
        seg._freed = True
    log._closed = True


def segment_files(directory: Path, suffix: str = ".log") -> list[Path]:
    return sorted(directory.glob("*" + suffix))


def open_descriptors(name_part: str) -> int:
    """How many of this process's descriptors name a file whose path contains ``name_part``."""
    count = 0
    for entry in os.scandir("/proc/self/fd"):
        try:
            target = os.readlink(entry.path)
        except OSError:
            continue
        if name_part in target:
            count += 1
    return count


