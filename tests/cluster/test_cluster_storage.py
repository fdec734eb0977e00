"""What cluster mode asks of both storage engines (the segment log on disk and the
in-memory one): leader epochs stamped on appends and kept on follower appends, the
replicated high watermark capping consumer reads, truncation, and the end offset of a
leader epoch found from the batches (logserver/cluster/epochs.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kafkaproto import ErrorCode
from kafkaproto.batch import iter_batches
from kafkaproto.records import build_batch
from logserver.cluster.epochs import UNDEFINED, end_offset_for_epoch, last_epoch
from logserver.config import load_config
from logserver.storage.api import Storage
from logserver.storage.memory import MemoryStorage
from logserver.storage.segment_log import SegmentLogStorage

pytestmark = pytest.mark.timeout(60)


def batch(*values: bytes) -> memoryview:
    return memoryview(bytearray(build_batch([(None, v, (), 1000) for v in values])))


def run(engine: str, tmp_path: Path, scenario) -> None:
    async def main() -> None:
        config = load_config({"log.dirs": str(tmp_path / engine)}, environ={})
        storage: Storage = SegmentLogStorage(config) if engine == "segment" else MemoryStorage(config)
        storage.open()
        await storage.start()
        try:
            await storage.create_topic("t", 1, {})
            await scenario(storage)
        finally:
            await storage.close()

    asyncio.run(main())


def epochs_in(storage: Storage) -> list[tuple[int, int]]:
    data = storage.read_bytes("t", 0, 0, 1 << 20) or b""
    return [(h.base_offset, h.partition_leader_epoch) for _, h in iter_batches(data)]


@pytest.mark.parametrize("engine", ["segment", "memory"])
def test_epochs_high_watermark_and_truncation(engine, tmp_path):
    async def scenario(storage: Storage) -> None:
        assert end_offset_for_epoch(storage, "t", 0, 0) == UNDEFINED and last_epoch(storage, "t", 0) is None
        storage.append("t", 0, batch(b"a", b"b"), 9)  # epoch 0 (single-node default)
        storage.set_leader_epoch("t", 0, 2)
        storage.append("t", 0, batch(b"c"), 9)
        storage.append("t", 0, batch(b"d"), 9)
        storage.set_leader_epoch("t", 0, 5)
        storage.append("t", 0, batch(b"e", b"f"), 9)
        assert epochs_in(storage) == [(0, 0), (2, 2), (3, 2), (4, 5)]
        assert last_epoch(storage, "t", 0) == 5
        assert end_offset_for_epoch(storage, "t", 0, 0) == (0, 2)
        assert end_offset_for_epoch(storage, "t", 0, 1) == (0, 2)  # epoch 1 wrote nothing
        assert end_offset_for_epoch(storage, "t", 0, 2) == (2, 4)
        assert end_offset_for_epoch(storage, "t", 0, 4) == (2, 4)
        assert end_offset_for_epoch(storage, "t", 0, 5) == (5, 6)
        # Consumers stop at the replicated high watermark, a follower reads to the end.
        storage.set_high_watermark("t", 0, 3)
        consumer = storage.read("t", 0, 3, 1 << 20, min_one=True, fetch_version=12)
        assert consumer.size == 0 and consumer.high_watermark == 3
        follower = storage.read("t", 0, 3, 1 << 20, min_one=True, fetch_version=12, replica=True)
        assert follower.error == ErrorCode.NONE and follower.size > 0
        if not isinstance(follower.records, bytes):
            follower.records.release()
        # A follower's copy keeps the leader's offsets and epochs byte for byte.
        copy = bytearray(storage.read_bytes("t", 0, 0, 1 << 20) or b"")
        await storage.truncate_to("t", 0, 2)
        assert storage.log_end_offset("t", 0) == 2 and epochs_in(storage) == [(0, 0)]
        storage.set_leader_epoch("t", 0, 7)  # must not restamp replicated batches
        assert storage.append_replica("t", 0, memoryview(copy)) == 6
        assert bytes(storage.read_bytes("t", 0, 0, 1 << 20) or b"") == bytes(copy)
        storage.set_high_watermark("t", 0, None)  # single-node again: hw is the log end
        assert storage.high_watermark("t", 0) == 6

    run(engine, tmp_path, scenario)
