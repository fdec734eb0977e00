"""LogManager: topics persisted, marker and checkpoint files, unclean restart recovery."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers.log_helpers import append, read_records
from helpers.waiting import wait_until

from logserver.log import (
    InvalidTopicError,
    LogDirLockedError,
    LogManager,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from logserver.log.manager import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_FILE, TOPICS_FILE

SETTINGS = {"log.segment.bytes": 1000, "log.index.interval.bytes": 100}


def test_topics_persist_across_reopen(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path, SETTINGS)
    assert not mgr.had_clean_shutdown
    info = mgr.create_topic("events", 3, {"segment.bytes": "500", "retention.ms": "1000"})
    mgr.create_topic("other.topic_x-1", 1)
    assert len(info.topic_id) == 16
    # Partitions are made lazily: no directory (no file) until a partition's first append.
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == []
    log = mgr.get_log("events", 1)
    assert log.config.segment_bytes == 500 and log.config.index_interval_bytes == 100
    for _ in range(20):
        append(log, n=2)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["events-1"]
    assert (tmp_path / "events-1" / "partition.metadata").exists()
    mgr.close()
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["events-1"]
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    doc = json.loads((tmp_path / TOPICS_FILE).read_text())
    assert doc["topics"]["events"]["partitions"] == 3

    mgr = LogManager(tmp_path, SETTINGS)
    assert mgr.had_clean_shutdown and not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert set(mgr.topics()) == {"events", "other.topic_x-1"}
    assert mgr.topics()["events"].topic_id == info.topic_id
    assert mgr.topics()["events"].configs == {"segment.bytes": "500", "retention.ms": "1000"}
    log = mgr.get_log("events", 1)
    assert log.log_end_offset == 40 and len(read_records(log)) == 40
    empty = mgr.get_log("events", 2)  # never written: empty at offset 0, and writable
    assert (empty.log_start_offset, empty.log_end_offset) == (0, 0)
    append(empty, n=3)
    assert empty.log_end_offset == 3 and len(read_records(empty)) == 3
    with pytest.raises(UnknownTopicOrPartitionError):
        mgr.get_log("events", 3)
    mgr.close()


def test_checkpoint_file_format(tmp_path: Path) -> None:
    with LogManager(tmp_path) as mgr:
        mgr.create_topic("a", 2)
        append(mgr.get_log("a", 1), n=5)
        mgr.flush()
        lines = (tmp_path / RECOVERY_POINT_FILE).read_text().splitlines()
        assert lines == ["0", "2", "a 0 0", "a 1 5"]


def test_create_delete_and_validation(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path, {"log.segment.delete.delay.ms": 0})
    mgr.create_topic("t", 2)
    with pytest.raises(TopicExistsError):
        mgr.create_topic("t", 1)
    for bad in ("", ".", "..", "a/b", "sp ace", "x" * 250):
        with pytest.raises(InvalidTopicError):
            mgr.create_topic(bad, 1)
    with pytest.raises(InvalidTopicError):
        mgr.create_topic("zero", 0)
    append(mgr.get_log("t", 0), n=3)
    mgr.delete_topic("t")
    assert not (tmp_path / "t-0").exists() and not (tmp_path / "t-1").exists()  # renamed at once
    wait_until(lambda: not mgr.deleter.pending(), timeout=10.0)  # removed after file.delete.delay.ms (0 here)
    assert not any(p.is_dir() for p in tmp_path.iterdir())
    with pytest.raises(UnknownTopicOrPartitionError):
        mgr.delete_topic("t")
    info = mgr.create_topic("t", 1)  # same name again: a fresh, empty log
    assert mgr.get_log("t", 0).log_end_offset == 0
    grown = mgr.create_partitions("t", 3)
    assert grown.partitions == 3 and grown.topic_id == info.topic_id
    assert mgr.get_log("t", 2).log_end_offset == 0
    mgr.close()
    mgr = LogManager(tmp_path)
    assert mgr.topics()["t"].partitions == 3
    mgr.close()


def test_second_manager_is_locked_out(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path)
    with pytest.raises(LogDirLockedError):
        LogManager(tmp_path)
    mgr.close()
    LogManager(tmp_path).close()


def test_unclean_restart_recovers_from_checkpoint(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path, SETTINGS)
    mgr.create_topic("t", 1)
    log = mgr.get_log("t", 0)
    for _ in range(20):
        append(log, n=2)
    mgr.flush()  # recovery point 40
    for _ in range(5):
        append(log, n=2)
    tail = log.active_segment
    path, size = tail.path, tail.size
    # kill -9: no close, no marker; the last write was torn
    from helpers.log_helpers import crash

    crash(log)
    os.close(mgr._lock_fd)
    os.truncate(path, size - 3)
    mgr = LogManager(tmp_path, SETTINGS)
    assert not mgr.had_clean_shutdown
    log = mgr.get_log("t", 0)
    assert log.log_end_offset == 48
    assert log.recovery_point == 40
    assert mgr.flush() is None and log.recovery_point == 48
    mgr.close()


def test_checkpoint_rate_limit(tmp_path: Path) -> None:
    with LogManager(tmp_path, {"log.flush.offset.checkpoint.interval.ms": 3_600_000}) as mgr:
        mgr.create_topic("a", 1)
        append(mgr.get_log("a", 0), n=2)
        mgr.get_log("a", 0).flush()
        assert not mgr.maybe_checkpoint_recovery_points()  # too soon
        mgr._checkpoint_interval_s = 0
        job = mgr.maybe_checkpoint_recovery_points()
        assert job
        job.result(timeout=10)  # written on the storage worker, off the caller's thread
        assert (tmp_path / RECOVERY_POINT_FILE).read_text().splitlines()[-1] == "a 0 2"


def test_partition_paths_built_cheaply_equal_the_plain_join(tmp_path: Path) -> None:
    """The paths a partition's log and segment files get through ``child_path`` (built
    without re-parsing the parent) are the ones ``/`` gives, of the same type; a written
    and an empty partition both open again after a restart at those paths."""
    from logserver.log.fsutil import child_path

    for name in ("events-0", "00000000000000000000.log", "a.b-12.timeindex.cleaned"):
        built = child_path(tmp_path, name)
        assert built == tmp_path / name and type(built) is type(tmp_path / name)
        assert str(built) == str(tmp_path / name) and built.parent == tmp_path
    mgr = LogManager(tmp_path, SETTINGS)
    mgr.create_topic("events", 2)
    append(mgr.get_log("events", 1), 3)
    seg = mgr.get_log("events", 1).segments[0]
    assert seg.path == tmp_path / "events-1" / "00000000000000000000.log" and seg.path.exists()
    assert seg.offset_index.path == tmp_path / "events-1" / "00000000000000000000.index"
    mgr.close()
    mgr = LogManager(tmp_path, SETTINGS)
    assert len(read_records(mgr.get_log("events", 1), 0)) == 3
    assert mgr.get_log("events", 0).log_end_offset == 0
    assert not (tmp_path / "events-0").exists()
    mgr.close()


def test_clean_shutdown_of_many_partitions_syncs_once_and_restarts_clean(tmp_path: Path) -> None:
    """At BATCHED_SYNC_PARTITIONS partitions a clean close writes each log's last state
    unsynced and syncs the file system once: the recovery points still reach every log
    end, the marker is written, and the reopened manager trusts them (clean shutdown)
    and reads every record back."""
    from logserver.log.manager import BATCHED_SYNC_PARTITIONS

    mgr = LogManager(tmp_path, SETTINGS)
    mgr.create_topic("wide", BATCHED_SYNC_PARTITIONS)
    written = range(0, BATCHED_SYNC_PARTITIONS, 50)
    for p in written:
        append(mgr.get_log("wide", p), 2 + p % 3)
    mgr.close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    points = (tmp_path / RECOVERY_POINT_FILE).read_text().split("\n")
    recorded = {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1])
                for line in points[2:] if line.strip()}
    for p in written:
        assert recorded[f"wide {p}"] == 2 + p % 3
    for p in written:  # producer snapshots and trimmed indexes were written too
        assert list((tmp_path / f"wide-{p}").glob("*.snapshot"))
    mgr = LogManager(tmp_path, SETTINGS)
    assert mgr.had_clean_shutdown
    for p in written:
        assert len(read_records(mgr.get_log("wide", p), 0)) == 2 + p % 3
    assert mgr.get_log("wide", 1).log_end_offset == 0
    mgr.close()
