"""OffsetIndex / TimeIndex: sparse lookups, monotonic appends, truncation, trim, sanity."""

from __future__ import annotations

from pathlib import Path

import pytest

from logserver.log import IndexFullError
from logserver.log.index import OffsetIndex, TimeIndex, index_file_name


def test_file_name_is_kafkas() -> None:
    assert index_file_name(42, ".index") == "00000000000000000042.index"


def test_offset_index_lookup_truncate_trim_reopen(tmp_path: Path) -> None:
    path = tmp_path / index_file_name(100, ".index")
    idx = OffsetIndex(path, 100, 1024, writable=True)
    assert path.stat().st_size == 1024  # preallocated
    assert idx.lookup(150) == (100, 0)  # empty: segment start
    for i in range(1, 11):
        idx.append(100 + i * 10, i * 1000)
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(110) == (110, 1000)
    assert idx.lookup(155) == (150, 5000)
    assert idx.lookup(10_000) == (200, 10_000)
    assert idx.lookup_position(5500) == (150, 5000)
    assert idx.lookup_position(999) == (100, 0)
    with pytest.raises(ValueError):
        idx.append(200, 20_000)  # offsets strictly rise
    idx.truncate_to(150)
    assert idx.entries == 4 and idx.last_entry() == (140, 4000)
    idx.close()
    assert path.stat().st_size == 4 * 8  # trimmed on close
    again = OffsetIndex(path, 100, 1024, writable=False)
    assert again.entries == 4 and again.sanity_check(log_size=5000) is None
    assert again.lookup(145) == (140, 4000)
    assert "beyond" in (again.sanity_check(log_size=4000) or "")
    again.close()


def test_offset_index_full(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "0.index", 0, 24, writable=True)
    for i in range(3):
        idx.append(i, i * 10)
    assert idx.is_full
    with pytest.raises(IndexFullError):
        idx.append(5, 50)
    idx.close()


def test_untrimmed_index_fails_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    idx = OffsetIndex(path, 0, 1024, writable=True)
    idx.append(3, 100)
    idx.append(7, 200)
    if idx._mmap is not None:  # crash: the file stays preallocated
        idx._mmap.close()
        idx._mmap = None
    idx._release_fd()
    again = OffsetIndex(path, 0, 1024, writable=False)
    assert again.entries == 128
    assert "not increasing" in (again.sanity_check(10_000) or "")
    again.close()


def test_time_index(tmp_path: Path) -> None:
    path = tmp_path / index_file_name(0, ".timeindex")
    idx = TimeIndex(path, 0, 1200, writable=True)
    assert idx.lookup(5) == (-1, 0)
    idx.maybe_append(1000, 0)
    idx.maybe_append(1000, 5)  # not above the last timestamp: skipped
    idx.maybe_append(2000, 10)
    idx.maybe_append(3000, 20)
    assert idx.entries == 3
    assert idx.lookup(999) == (-1, 0)
    assert idx.lookup(2500) == (2000, 10)
    assert idx.lookup(3000) == (3000, 20)
    idx.truncate_to(20)
    assert idx.last_entry() == (2000, 10)
    assert idx.sanity_check(next_offset=11) is None
    assert idx.sanity_check(next_offset=10) is not None
    idx.close()
    assert path.stat().st_size == 24


def test_time_index_final_entry_replaces_last_when_full(tmp_path: Path) -> None:
    idx = TimeIndex(tmp_path / "0.timeindex", 0, 24, writable=True)
    idx.maybe_append(10, 0)
    idx.maybe_append(20, 1)
    assert idx.is_full
    idx.maybe_append(30, 2, final=True)
    assert idx.entries == 2 and idx.last_entry() == (30, 2)
    idx.close()
