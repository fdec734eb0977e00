"""The Storage contract: the same assertions against the segment log (real files in a
temporary data directory) and the in-memory engine, so the in-memory one used by the
fast handler tests cannot drift from the real one. Engine-specific facts (what is on
disk after a failed creation, a reopen) follow at the end."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from kafkaproto import ErrorCode
from kafkaproto.control import build_marker
from kafkaproto.records import build_batch, decode_batch
from logserver.broker_overrides import BrokerOverrides
from logserver.config import load_config
from logserver.storage import (
    EARLIEST,
    LATEST,
    MAX_TIMESTAMP,
    InvalidConfigError,
    InvalidTopicError,
    ReplicaLog,
    Storage,
    StorageEngine,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from logserver.storage.memory import MemoryStorage
from logserver.storage.segment_log import SegmentLogStorage

# Values refused with INVALID_CONFIG: out of Kafka's range, no such codec, or a meaning
# this server cannot honour (tiered storage).
REFUSED = {"flush.messages": "0", "flush.ms": "-1", "compression.type": "brotli",
           "remote.storage.enable": "true"}


pytestmark = pytest.mark.timeout(60)

ENGINES = ["segment", "memory"]


@asynccontextmanager
async def opened(engine: str, data: Path, **settings: object) -> AsyncIterator[StorageEngine]:
    config = load_config({"log.dirs": str(data), **{k: str(v) for k, v in settings.items()}},
                         environ={})
    storage: StorageEngine = SegmentLogStorage(config) if engine == "segment" else MemoryStorage(config)
    storage.open()
    await storage.start()
    try:
        yield storage
    finally:
        await storage.close()


def run(engine: str, tmp_path: Path, scenario: Callable[[StorageEngine], Awaitable[None]],
        **settings: object) -> None:
    async def main() -> None:
        async with opened(engine, tmp_path / "data", **settings) as storage:
            await scenario(storage)

    asyncio.run(main())


def batch(*values: bytes, timestamp: int = 1_000, producer_id: int = -1, producer_epoch: int = -1,
          base_sequence: int = -1) -> memoryview:
    return memoryview(bytearray(build_batch(
        [(None, v, (), timestamp + i) for i, v in enumerate(values)], producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=base_sequence)))


def records_of(storage: Storage, topic: str, partition: int = 0,
               offset: int = 0) -> list[bytes | None]:
    out: list[bytes | None] = []
    while True:
        data = storage.read_bytes(topic, partition, offset, 1 << 20)
        if data is None:
            return out
        position = 0
        while position < len(data):
            header, records = decode_batch(data, position)
            out.extend(r.value for r in records if r.offset >= offset)
            position += header.size
            offset = header.next_offset


def _members(protocol: type) -> set[str]:
    return {name for name in (*vars(protocol), *getattr(protocol, "__annotations__", {}))
            if not name.startswith("_")}


@pytest.mark.parametrize("engine", ENGINES)
def test_engines_have_both_interfaces_and_clients_see_no_replica_only_method(
        engine: str, tmp_path: Path) -> None:
    """``Storage`` is what handlers see (``Broker.storage``): nothing of ``ReplicaLog``,
    which only cluster replication drives (``Broker.engine``); an engine has both."""
    replica_only = _members(ReplicaLog)
    assert {"append_replica", "truncate_to", "restart_at", "set_high_watermark",
            "set_leader_epoch", "replication_hook"} <= replica_only
    assert replica_only.isdisjoint(_members(Storage))
    assert {"append", "read", "create_topic", "log_end_offset"} <= _members(Storage)
    config = load_config({"log.dirs": str(tmp_path)}, environ={})
    storage = SegmentLogStorage(config) if engine == "segment" else MemoryStorage(config)
    missing = [name for name in _members(Storage) | replica_only if not hasattr(storage, name)]
    assert missing == []


@pytest.mark.parametrize("engine", ENGINES)
def test_topics_are_created_listed_and_deleted(engine: str, tmp_path: Path) -> None:
    async def scenario(storage: StorageEngine) -> None:
        topic_id = await storage.create_topic("t", 3, {"retention.ms": "1000"})
        assert len(topic_id) == 16 and topic_id != bytes(16)
        assert storage.topic_names() == ["t"]
        assert storage.partition_count("t") == 3
        assert storage.topic_id("t") == topic_id and storage.topic_for_id(topic_id) == "t"
        config = storage.topic_config("t")
        assert config is not None and config.retention_ms == 1000
        assert storage.topic_overrides("t") == {"retention.ms": "1000"}
        with pytest.raises(TopicExistsError):
            await storage.create_topic("t", 1, {})
        assert await storage.delete_topic("t") == topic_id
        assert storage.topic_names() == [] and storage.partition_count("t") is None
        assert storage.topic_for_id(topic_id) is None
        with pytest.raises(UnknownTopicOrPartitionError):
            await storage.delete_topic("t")
        again = await storage.create_topic("t", 1, {})  # same name: a new, empty topic
        assert again != topic_id and storage.high_watermark("t", 0) == 0
        await storage.add_partitions("t", 3)
        assert storage.partition_count("t") == 3 and storage.topic_id("t") == again

    run(engine, tmp_path, scenario)


@pytest.mark.parametrize("engine", ENGINES)
def test_bad_creations_are_refused_and_leave_nothing(engine: str, tmp_path: Path) -> None:
    async def scenario(storage: StorageEngine) -> None:
        for bad in ("", "..", "a/b", "x" * 250):
            with pytest.raises(InvalidTopicError):
                await storage.create_topic(bad, 1, {})
        with pytest.raises(InvalidTopicError):
            await storage.create_topic("zero", 0, {})
        for key, value in REFUSED.items():
            with pytest.raises(InvalidConfigError, match=key):
                await storage.create_topic("refused", 1, {key: value})
        with pytest.raises(InvalidConfigError, match="no.such.setting"):
            await storage.create_topic("unknown", 1, {"no.such.setting": "1"})
        with pytest.raises(InvalidConfigError, match="segment.bytes"):
            await storage.create_topic("bad-value", 1, {"segment.bytes": "ten"})
        assert storage.topic_names() == []

    run(engine, tmp_path, scenario)


@pytest.mark.parametrize("engine", ENGINES)
def test_concurrent_creations_of_one_name_have_one_winner(engine: str, tmp_path: Path) -> None:
    async def scenario(storage: StorageEngine) -> None:
        outcomes = await asyncio.gather(*(storage.create_topic("race", 4, {}) for _ in range(3)),
                                        return_exceptions=True)
        winners = [o for o in outcomes if isinstance(o, bytes)]
        assert len(winners) == 1 and storage.topic_id("race") == winners[0]
        assert all(isinstance(o, TopicExistsError) for o in outcomes if not isinstance(o, bytes))
        # a deletion still running does not make a re-creation of the name fail
        deleted, created = await asyncio.gather(storage.delete_topic("race"),
                                                storage.create_topic("race", 1, {}))
        assert deleted == winners[0] and created != deleted
        assert storage.partition_count("race") == 1

    run(engine, tmp_path, scenario)


@pytest.mark.parametrize("engine", ENGINES)
def test_append_read_and_list_offsets(engine: str, tmp_path: Path) -> None:
    async def scenario(storage: StorageEngine) -> None:
        await storage.create_topic("t", 2, {})
        first = storage.append("t", 0, batch(b"a", b"b", timestamp=1_000), 9)
        assert (first.error, first.base_offset, first.log_start_offset) == (ErrorCode.NONE, 0, 0)
        if first.wait is not None:
            await first.wait
        second = storage.append("t", 0, batch(b"c", timestamp=5_000), 9)
        assert (second.error, second.base_offset) == (ErrorCode.NONE, 2)
        assert storage.high_watermark("t", 0) == 3 and storage.log_start_offset("t", 0) == 0
        assert records_of(storage, "t") == [b"a", b"b", b"c"]
        assert records_of(storage, "t", offset=2) == [b"c"]
        read = storage.read("t", 0, 0, 1 << 20, min_one=True, fetch_version=12)
        assert (read.error, read.high_watermark, read.log_start_offset) == (ErrorCode.NONE, 3, 0)
        assert read.size > 0
        assert storage.read("t", 0, 3, 1 << 20, min_one=True, fetch_version=12).size == 0
        assert storage.read("t", 0, 4, 100, min_one=True, fetch_version=12).error == \
            ErrorCode.OFFSET_OUT_OF_RANGE
        tiny = storage.read("t", 0, 0, 1, min_one=False, fetch_version=12)
        assert (tiny.error, tiny.size) == (ErrorCode.NONE, 0)
        assert storage.read("t", 0, 0, 1, min_one=True, fetch_version=12).size > 1  # KIP-74
        listed = {ts: storage.list_offset("t", 0, ts)[1:] for ts in (EARLIEST, LATEST, MAX_TIMESTAMP)}
        assert listed == {EARLIEST: (0, -1), LATEST: (3, -1), MAX_TIMESTAMP: (2, 5_000)}
        assert storage.list_offset("t", 0, 1_001)[1:] == (1, 1_001)
        assert storage.list_offset("t", 0, 4_000)[1:] == (2, 5_000)
        assert storage.list_offset("t", 0, 9_000)[1:] == (-1, -1)
        assert storage.list_offset("t", 1, MAX_TIMESTAMP)[1:] == (-1, -1)  # empty partition
        assert storage.list_offset("t", 0, -7).error == ErrorCode.INVALID_REQUEST
        for missing in (("t", 2), ("nope", 0)):
            assert storage.append(*missing, batch(b"x"), 9).error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            missed = storage.read(*missing, 0, 100, min_one=True, fetch_version=12)
            assert (missed.error, missed.size, missed.high_watermark) == \
                (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0, -1)
            assert storage.list_offset(*missing, LATEST).error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert storage.high_watermark(*missing) is None

    run(engine, tmp_path, scenario)


@pytest.mark.parametrize("engine", ENGINES)
def test_append_validation_and_idempotence(engine: str, tmp_path: Path) -> None:
    async def scenario(storage: StorageEngine) -> None:
        await storage.create_topic("small", 1, {"max.message.bytes": "200"})
        assert storage.append("small", 0, batch(b"x" * 300), 9).error == ErrorCode.MESSAGE_TOO_LARGE
        assert storage.append("small", 0, None, 9).error == ErrorCode.CORRUPT_MESSAGE
        corrupt = batch(b"y")
        corrupt[-1] ^= 0xFF
        assert storage.append("small", 0, corrupt, 9).error == ErrorCode.CORRUPT_MESSAGE
        await storage.create_topic("stamped", 1, {"message.timestamp.type": "LogAppendTime"})
        stamped = storage.append("stamped", 0, batch(b"z", timestamp=1), 9)
        assert stamped.error == ErrorCode.NONE and stamped.log_append_time > 1_000_000
        await storage.create_topic("idem", 1, {})
        pid = await storage.allocate_producer_id()
        assert await storage.allocate_producer_id() > pid
        ok = storage.append("idem", 0, batch(b"1", b"2", producer_id=pid, producer_epoch=0,
                                             base_sequence=0), 9)
        retry = storage.append("idem", 0, batch(b"1", b"2", producer_id=pid, producer_epoch=0,
                                                base_sequence=0), 9)
        assert (retry.error, retry.base_offset) == (ErrorCode.NONE, ok.base_offset)
        gap = storage.append("idem", 0, batch(b"4", producer_id=pid, producer_epoch=0,
                                              base_sequence=5), 9)
        assert gap.error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert storage.high_watermark("idem", 0) == 2

    run(engine, tmp_path, scenario)


@pytest.mark.parametrize("engine", ENGINES)
def test_roll_and_delete_records_below(engine: str, tmp_path: Path) -> None:
    async def scenario(storage: StorageEngine) -> None:
        await storage.create_topic("c", 1, {})
        for i in range(5):
            storage.append("c", 0, batch(b"old-%d" % i), 9)
        assert await storage.delete_records_below("c", 0, 3) == 0  # no whole segment below 3
        boundary = storage.roll("c", 0)
        assert boundary == 5
        storage.append("c", 0, batch(b"new"), 9)
        await storage.flush("c", 0)
        assert await storage.delete_records_below("c", 0, boundary) == boundary
        assert storage.log_start_offset("c", 0) == 5 and storage.high_watermark("c", 0) == 6
        assert records_of(storage, "c", offset=5) == [b"new"]
        assert storage.read("c", 0, 0, 100, min_one=True, fetch_version=12).error == \
            ErrorCode.OFFSET_OUT_OF_RANGE
        assert storage.list_offset("c", 0, EARLIEST)[1] == 5

    run(engine, tmp_path, scenario)


@pytest.mark.parametrize("engine", ENGINES)
def test_wait_for_append(engine: str, tmp_path: Path) -> None:
    async def scenario(storage: StorageEngine) -> None:
        await storage.create_topic("w", 2, {})
        loop = asyncio.get_running_loop()
        started = loop.time()
        await storage.wait_for_append([("w", 0)], 0.05)  # nothing comes: the timeout ends it
        assert loop.time() - started >= 0.04
        waiter = asyncio.ensure_future(storage.wait_for_append([("w", 1), ("gone", 0)], 30))
        await asyncio.sleep(0)
        assert not waiter.done()
        storage.append("w", 1, batch(b"wake"), 9)
        await asyncio.wait_for(waiter, 5)
        waiter = asyncio.ensure_future(storage.wait_for_append([("w", 0)], 30))
        await asyncio.sleep(0)
        await storage.delete_topic("w")  # a deleted topic's waiters wake too
        await asyncio.wait_for(waiter, 5)

    run(engine, tmp_path, scenario)


@pytest.mark.parametrize("engine", ENGINES)
def test_delete_records_moves_the_log_start_offset(engine: str, tmp_path: Path) -> None:
    async def scenario(storage: StorageEngine) -> None:
        await storage.create_topic("d", 2, {})
        for i in range(4):
            storage.append("d", 0, batch(b"a-%d" % i, b"b-%d" % i), 9)  # offsets 2i, 2i+1
        storage.roll("d", 0)
        storage.append("d", 0, batch(b"last"), 9)  # offset 8, a second segment
        assert await storage.delete_records("d", 0, 10) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
        assert await storage.delete_records("d", 0, -2) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
        assert (await storage.delete_records("d", 7, 0)).error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert (await storage.delete_records("nope", 0, 0)).error == \
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert await storage.delete_records("d", 0, 3) == (ErrorCode.NONE, 3)  # inside a batch
        assert storage.log_start_offset("d", 0) == 3
        assert storage.list_offset("d", 0, EARLIEST)[1] == 3
        assert storage.read("d", 0, 2, 1 << 20, min_one=True, fetch_version=12).error == \
            ErrorCode.OFFSET_OUT_OF_RANGE
        assert records_of(storage, "d", offset=3) == [b"b-1", b"a-2", b"b-2", b"a-3", b"b-3", b"last"]
        assert await storage.delete_records("d", 0, 1) == (ErrorCode.NONE, 3)  # never moves down
        assert await storage.delete_records("d", 0, -1) == (ErrorCode.NONE, 9)  # -1: the HW
        assert storage.log_start_offset("d", 0) == 9 and storage.high_watermark("d", 0) == 9
        assert storage.read("d", 0, 9, 100, min_one=True, fetch_version=12).error == ErrorCode.NONE
        storage.append("d", 0, batch(b"after"), 9)
        assert records_of(storage, "d", offset=9) == [b"after"]
        assert storage.log_start_offset("d", 1) == 0  # other partitions untouched
        sizes = {(p.topic, p.partition): p.size for d in storage.log_dirs() for p in d.partitions}
        assert set(sizes) == {("d", 0), ("d", 1)} and sizes[("d", 1)] == 0 and sizes[("d", 0)] > 0

    run(engine, tmp_path, scenario)


@pytest.mark.parametrize("engine", ENGINES)
def test_restart_at_empties_the_log_and_continues_at_the_offset(engine: str, tmp_path: Path) -> None:
    """Kafka's truncateFullyAndStartAt: a follower whose log ends below its leader's log
    start drops everything and appends the leader's batches from there."""
    async def scenario(storage: StorageEngine) -> None:
        await storage.create_topic("r", 2, {})
        for i in range(3):
            storage.append("r", 0, batch(b"old-%d" % i, producer_id=7, producer_epoch=0,
                                         base_sequence=i), 9)
        storage.roll("r", 0)
        storage.append("r", 0, batch(b"old-3"), 9)
        assert await storage.restart_at("r", 0, 40) == 40
        assert storage.log_start_offset("r", 0) == 40 and storage.log_end_offset("r", 0) == 40
        assert storage.read("r", 0, 2, 100, min_one=True, fetch_version=12).error == \
            ErrorCode.OFFSET_OUT_OF_RANGE
        assert storage.list_offset("r", 0, EARLIEST)[1] == 40
        assert storage.active_producers("r", 0) == []  # producer state starts over too
        leader = bytearray(batch(b"new-40", b"new-41"))
        leader[0:8] = (40).to_bytes(8, "big")  # the leader's offsets, kept by the follower
        assert storage.append_replica("r", 0, memoryview(leader)) == 42
        assert records_of(storage, "r", offset=40) == [b"new-40", b"new-41"]
        assert storage.log_end_offset("r", 1) == 0  # other partitions untouched
        with pytest.raises(UnknownTopicOrPartitionError):
            await storage.restart_at("r", 9, 1)

    run(engine, tmp_path, scenario)


@pytest.mark.parametrize("engine", ENGINES)
def test_replicated_markers_and_truncation_keep_the_last_stable_offset(engine: str,
                                                                       tmp_path: Path) -> None:
    """A follower's transaction index follows what it replicates (markers included) and
    what it truncates, so it has the right last stable offset the moment it leads."""
    def replica_batch(offset: int, value: bytes) -> memoryview:
        data = bytearray(build_batch([(None, value, (), 1_000)], producer_id=5, producer_epoch=0,
                                     base_sequence=offset, is_transactional=True))
        data[0:8] = offset.to_bytes(8, "big")
        return memoryview(data)

    async def scenario(storage: StorageEngine) -> None:
        await storage.create_topic("t", 1, {})
        storage.append_replica("t", 0, replica_batch(0, b"open"))
        assert storage.last_stable_offset("t", 0) == 0  # an open transaction from offset 0
        marker = bytearray(build_marker(5, 0, commit=True, coordinator_epoch=0, timestamp_ms=1_000))
        marker[0:8] = (1).to_bytes(8, "big")
        storage.append_replica("t", 0, memoryview(marker))  # the leader's commit marker
        assert storage.last_stable_offset("t", 0) == 2
        storage.append_replica("t", 0, replica_batch(2, b"open-again"))
        assert storage.last_stable_offset("t", 0) == 2
        await storage.truncate_to("t", 0, 2)  # the divergent tail goes, and its transaction
        assert storage.log_end_offset("t", 0) == 2 and storage.last_stable_offset("t", 0) == 2

    run(engine, tmp_path, scenario)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_replicated_marker_fences_older_coordinators(engine: str, tmp_path: Path) -> None:
    """A follower learns each producer's coordinator epoch from the markers it replicates,
    so once it leads it refuses markers from an older coordinator (a zombie one)."""
    async def scenario(storage: StorageEngine) -> None:
        await storage.create_topic("t", 1, {})
        marker = bytearray(build_marker(5, 0, commit=True, coordinator_epoch=4, timestamp_ms=1_000))
        storage.append_replica("t", 0, memoryview(marker))
        assert [(p[0], p[5]) for p in storage.active_producers("t", 0) or []] == [(5, 4)]
        refused = storage.write_txn_marker("t", 0, 5, 0, commit=False, coordinator_epoch=3)
        assert refused.error == ErrorCode.TRANSACTION_COORDINATOR_FENCED
        assert storage.log_end_offset("t", 0) == 1
        written = storage.write_txn_marker("t", 0, 5, 0, commit=False, coordinator_epoch=4)
        assert written.error == ErrorCode.NONE and storage.log_end_offset("t", 0) == 2
        written = storage.write_txn_marker("t", 0, 5, 0, commit=True, coordinator_epoch=6)
        assert written.error == ErrorCode.NONE
        assert [(p[0], p[5]) for p in storage.active_producers("t", 0) or []] == [(5, 6)]
        # another producer id has no marker here: any coordinator epoch is accepted
        other = storage.write_txn_marker("t", 0, 9, 0, commit=False, coordinator_epoch=0)
        assert other.error == ErrorCode.NONE

    run(engine, tmp_path, scenario)


def test_restart_at_survives_a_restart(tmp_path: Path) -> None:
    async def restart(storage: Storage) -> None:
        await storage.create_topic("s", 1, {})
        storage.append("s", 0, batch(b"old"), 9)
        await storage.restart_at("s", 0, 25)
        leader = bytearray(batch(b"kept"))
        leader[0:8] = (25).to_bytes(8, "big")
        storage.append_replica("s", 0, memoryview(leader))
        await storage.flush("s", 0)

    run("segment", tmp_path, restart)

    async def reopened(storage: Storage) -> None:
        assert storage.log_start_offset("s", 0) == 25 and storage.log_end_offset("s", 0) == 26
        assert records_of(storage, "s", offset=25) == [b"kept"]

    run("segment", tmp_path, reopened)


@pytest.mark.parametrize("engine", ENGINES)
def test_alter_topic_config_applies_at_once(engine: str, tmp_path: Path) -> None:
    async def scenario(storage: StorageEngine) -> None:
        await storage.create_topic("a", 2, {"retention.ms": "1000"})
        await storage.alter_topic_config("a", {"max.message.bytes": "100",
                                               "message.timestamp.type": "LogAppendTime"})
        assert storage.topic_overrides("a") == {"max.message.bytes": "100",
                                                "message.timestamp.type": "LogAppendTime"}
        config = storage.topic_config("a")
        assert config is not None and config.retention_ms == 7 * 86_400_000  # back to default
        assert config.max_message_bytes == 100 and config.log_append_time
        result = storage.append("a", 1, batch(b"x" * 200), 9)
        assert result.error == ErrorCode.MESSAGE_TOO_LARGE
        result = storage.append("a", 1, batch(b"small"), 9)
        assert result.error == ErrorCode.NONE and result.log_append_time > 0
        with pytest.raises(InvalidConfigError):
            await storage.alter_topic_config("a", {"retention.ms": "soon"})
        assert storage.topic_overrides("a") == {"max.message.bytes": "100",
                                                "message.timestamp.type": "LogAppendTime"}
        with pytest.raises(UnknownTopicOrPartitionError):
            await storage.alter_topic_config("nope", {})

    run(engine, tmp_path, scenario)


@pytest.mark.parametrize("engine", ENGINES)
def test_dynamic_broker_configs_change_inherited_settings(engine: str, tmp_path: Path) -> None:
    async def scenario(storage: StorageEngine) -> None:
        await storage.create_topic("inherits", 2, {})
        await storage.create_topic("own", 1, {"retention.ms": "5000"})
        await storage.alter_broker_overrides(BrokerOverrides(
            {"log.retention.ms": "60000", "message.max.bytes": "100"}, {"log.retention.ms": "70000"}))
        assert storage.broker_overrides().effective() == {"log.retention.ms": "70000",
                                                          "message.max.bytes": "100"}
        inherits, own = storage.topic_config("inherits"), storage.topic_config("own")
        assert inherits is not None and inherits.retention_ms == 70000  # this broker's wins
        assert own is not None and own.retention_ms == 5000 and own.max_message_bytes == 100
        assert storage.append("inherits", 1, batch(b"x" * 200), 9).error == ErrorCode.MESSAGE_TOO_LARGE
        await storage.create_topic("later", 1, {})
        later = storage.topic_config("later")
        assert later is not None and later.retention_ms == 70000
        await storage.alter_broker_overrides(BrokerOverrides())
        inherits = storage.topic_config("inherits")
        assert inherits is not None and inherits.retention_ms == 7 * 86_400_000
        assert storage.append("inherits", 1, batch(b"x" * 200), 9).error == ErrorCode.NONE

    run(engine, tmp_path, scenario)


# -- the segment log only: what is on disk ---------------------------------------------------


def test_failed_creation_leaves_nothing_behind(tmp_path: Path) -> None:
    data = tmp_path / "data"

    async def scenario(storage: StorageEngine) -> None:
        await storage.create_topic("first", 1, {})
        (data / "broken-2").write_text("a file where partition 2's directory must go")
        with pytest.raises(OSError):
            await storage.create_topic("broken", 4, {})
        assert storage.topic_names() == ["first"]
        # (Partitions get their directories with their first append: none here.)
        assert sorted(p.name for p in data.iterdir() if p.is_dir()) == []
        topics = json.loads((data / "__topics.json").read_text())["topics"]
        assert set(topics) == {"first"}
        (data / "broken-2").unlink()
        await storage.create_topic("broken", 4, {})
        assert storage.partition_count("broken") == 4

    run("segment", tmp_path, scenario)

    async def reopened(storage: Storage) -> None:
        assert storage.topic_names() == ["broken", "first"]

    run("segment", tmp_path, reopened)


def test_stored_refused_configs_still_load(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "data"

    async def create(storage: Storage) -> None:
        await storage.create_topic("legacy", 1, {"retention.ms": "5000"})

    run("segment", tmp_path, create)
    path = data / "__topics.json"
    doc = json.loads(path.read_text())
    doc["topics"]["legacy"]["configs"].update({"remote.storage.enable": "true",
                                               "no.such.config": "1"})
    path.write_text(json.dumps(doc))

    async def reopened(storage: Storage) -> None:
        assert storage.topic_overrides("legacy") == {"retention.ms": "5000"}
        config = storage.topic_config("legacy")
        assert config is not None and config.retention_ms == 5000

    with caplog.at_level(logging.WARNING, logger="logserver.storage.segment_log"):
        run("segment", tmp_path, reopened)
    warnings = [r.getMessage() for r in caplog.records if "legacy" in r.getMessage()]
    assert len(warnings) == 1
    assert "remote.storage.enable=true" in warnings[0] and "no.such.config=1" in warnings[0]


def test_delete_records_and_config_changes_survive_a_restart(tmp_path: Path) -> None:
    async def change(storage: Storage) -> None:
        await storage.create_topic("p", 1, {})
        for i in range(3):
            storage.append("p", 0, batch(b"v-%d" % i), 9)
        assert await storage.delete_records("p", 0, 2) == (ErrorCode.NONE, 2)
        await storage.alter_topic_config("p", {"retention.ms": "60000", "segment.bytes": "4096",
                                               "preallocate": "true"})  # inert: kept, reported

    run("segment", tmp_path, change)

    async def reopened(storage: Storage) -> None:
        assert storage.log_start_offset("p", 0) == 2
        assert records_of(storage, "p", offset=2) == [b"v-2"]
        assert storage.topic_overrides("p") == {"retention.ms": "60000", "segment.bytes": "4096",
                                                "preallocate": "true"}
        config = storage.topic_config("p")
        assert config is not None and config.retention_ms == 60000 and config.segment_bytes == 4096
        await storage.delete_topic("p")
        await storage.create_topic("p", 1, {})  # same name: starts at 0 again

    run("segment", tmp_path, reopened)

    async def recreated(storage: Storage) -> None:
        assert storage.log_start_offset("p", 0) == 0

    run("segment", tmp_path, recreated)


def test_dynamic_broker_configs_survive_a_restart(tmp_path: Path) -> None:
    async def change(storage: Storage) -> None:
        await storage.create_topic("r", 1, {})
        await storage.alter_broker_overrides(BrokerOverrides({"log.segment.bytes": "4096"}))

    run("segment", tmp_path, change)

    async def reopened(storage: Storage) -> None:
        assert storage.broker_overrides().cluster_default == {"log.segment.bytes": "4096"}
        config = storage.topic_config("r")
        assert config is not None and config.segment_bytes == 4096

    run("segment", tmp_path, reopened)
