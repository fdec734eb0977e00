"""A partition never written has no directory: its first append makes it and its files,
with directory fsyncs that take tens of milliseconds on a real disk. A Produce that
awaits its answer (``defer_io``) has that append deferred and the files made on a thread,
so producing to a thousand new partitions does not stall the event loop for a thousand
fsyncs; other callers (acks=0, the coordinators' synchronous appends) still append
inline, so their writes are done before the next request is read."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from kafkaproto import ErrorCode
from kafkaproto.records import build_batch
from logserver.config import load_config
from logserver.internal_topics import OFFSETS_TOPIC
from logserver.log.log import Log
from logserver.storage.segment_log import SegmentLogStorage

pytestmark = pytest.mark.timeout(60)


def _batch(value: bytes) -> memoryview:
    return memoryview(bytearray(build_batch([(None, value, (), int(time.time() * 1000))])))


@asynccontextmanager
async def _opened(tmp_path: Path) -> AsyncIterator[SegmentLogStorage]:
    storage = SegmentLogStorage(load_config({"log.dirs": str(tmp_path / "data")}, environ={}))
    storage.open()
    await storage.start()
    try:
        yield storage
    finally:
        await storage.close()


def _record_directory_threads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the threads that made a partition directory."""
    threads: list[str] = []
    made = Log.ensure_directory

    def recording(log_: Log) -> None:
        if log_.directory_pending:
            threads.append(threading.current_thread().name)
        made(log_)

    monkeypatch.setattr(Log, "ensure_directory", recording)
    return threads


def test_the_first_append_to_a_new_partition_makes_its_directory_off_the_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    threads = _record_directory_threads(monkeypatch)

    async def main() -> None:
        async with _opened(tmp_path) as storage:
            await storage.create_topic("events", 3, {})
            partition_dir = tmp_path / "data" / "events-1"
            assert not partition_dir.exists()  # made lazily
            first = storage.append("events", 1, _batch(b"one"), 9, defer_io=True)
            assert first.deferred is not None, "the first append ran inline"
            assert not partition_dir.exists(), "the loop made the directory"
            second = storage.append("events", 1, _batch(b"two"), 9, defer_io=True)  # behind it
            assert second.deferred is not None
            assert (await first.deferred).error == ErrorCode.NONE
            assert (await second.deferred).error == ErrorCode.NONE
            assert partition_dir.is_dir()
            assert (partition_dir / "00000000000000000000.log").is_file()
            assert storage.high_watermark("events", 1) == 2
            third = storage.append("events", 1, _batch(b"three"), 9, defer_io=True)
            assert third.deferred is None and third.error == ErrorCode.NONE  # inline again

    asyncio.run(main())
    loop_thread = threading.main_thread().name
    assert threads and loop_thread not in threads


def test_a_first_append_without_defer_io_stays_inline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    threads = _record_directory_threads(monkeypatch)

    async def main() -> None:
        async with _opened(tmp_path) as storage:
            await storage.create_topic(OFFSETS_TOPIC, 2, {"cleanup.policy": "compact"})
            build = build_batch([(b"key", b"value", (), int(time.time() * 1000))])
            result = storage.append(OFFSETS_TOPIC, 0, memoryview(bytearray(build)), 9)  # a coordinator's
            assert result.deferred is None and result.error == ErrorCode.NONE
            assert result.base_offset == 0

    asyncio.run(main())
    assert threads == [threading.main_thread().name]
