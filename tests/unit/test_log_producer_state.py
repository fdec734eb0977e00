"""Idempotent producers: duplicates answered with the original offsets, gaps and stale
epochs refused, and the state surviving clean close (snapshot) and kill -9 (replay)."""

from __future__ import annotations

from pathlib import Path

from helpers.log_helpers import crash, make_batch, small_config

from logserver.log import Log, Verdict
from logserver.log.producer_state import ProducerStateManager

PID = 4242


def _batch(seq: int, n: int = 2, epoch: int = 0, pid: int = PID, ts: int = 1000):
    return make_batch(n, ts, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def _produce(log: Log, seq: int, n: int = 2, epoch: int = 0, pid: int = PID):
    """What the broker does: check, then append only on APPEND."""
    buf, header = _batch(seq, n, epoch, pid)
    decision = log.check_producer(header)
    if decision.verdict == Verdict.APPEND:
        return decision, log.append(buf, header)
    return decision, None


def test_sequence_rules(tmp_path: Path) -> None:
    ps = ProducerStateManager(tmp_path)
    _, h = _batch(0)
    assert ps.check(h).verdict == Verdict.APPEND
    ps.update(h, 0)
    _, h2 = _batch(2)
    assert ps.check(h2).verdict == Verdict.APPEND
    ps.update(h2, 2)
    # retry of the first batch: duplicate, with its original offsets
    dup = ps.check(_batch(0)[1])
    assert dup.verdict == Verdict.DUPLICATE and (dup.base_offset, dup.last_offset) == (0, 1)
    # gap
    assert ps.check(_batch(5)[1]).verdict == Verdict.OUT_OF_ORDER_SEQUENCE
    # same first seq, different length: not a duplicate, and out of order
    assert ps.check(_batch(0, n=1)[1]).verdict == Verdict.OUT_OF_ORDER_SEQUENCE
    # new epoch must start at 0
    assert ps.check(_batch(4, epoch=1)[1]).verdict == Verdict.OUT_OF_ORDER_SEQUENCE
    _, h3 = _batch(0, epoch=1)
    assert ps.check(h3).verdict == Verdict.APPEND
    ps.update(h3, 4)
    # the old epoch is fenced now (even its former duplicates)
    assert ps.check(_batch(4, epoch=0)[1]).verdict == Verdict.INVALID_PRODUCER_EPOCH
    assert ps.check(_batch(0, epoch=0)[1]).verdict == Verdict.INVALID_PRODUCER_EPOCH
    # unknown producers start anywhere (Kafka >= 2.5); non-idempotent batches always append
    assert ps.check(_batch(77, pid=1)[1]).verdict == Verdict.APPEND
    assert ps.check(make_batch(1)[1]).verdict == Verdict.APPEND


def test_only_last_five_batches_are_remembered(tmp_path: Path) -> None:
    ps = ProducerStateManager(tmp_path)
    for i in range(7):
        _, h = _batch(2 * i)
        ps.update(h, 100 + 2 * i)
    assert ps.check(_batch(4)[1]).base_offset == 104  # batch 3 of 7: in the window
    assert ps.check(_batch(2)[1]).verdict == Verdict.OUT_OF_ORDER_SEQUENCE  # fell out


def test_sequence_wraps(tmp_path: Path) -> None:
    ps = ProducerStateManager(tmp_path)
    _, h = _batch(2**31 - 2, n=2)  # last sequence 2**31 - 1
    ps.update(h, 0)
    assert ps.check(_batch(0)[1]).verdict == Verdict.APPEND
    _, wrapping = _batch(2**31 - 1, n=3)  # from the top through 0 and 1
    assert wrapping.last_sequence == 1


def test_duplicates_through_the_log(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0")
    assert _produce(log, 0)[1] == 0
    assert _produce(log, 2)[1] == 2
    decision, appended = _produce(log, 0)
    assert appended is None and decision.verdict == Verdict.DUPLICATE
    assert decision.base_offset == 0
    decision, appended = _produce(log, 9)
    assert appended is None and decision.verdict == Verdict.OUT_OF_ORDER_SEQUENCE
    assert log.log_end_offset == 4
    log.close()


def test_state_survives_clean_close(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = Log(d, small_config())
    for i in range(20):
        _produce(log, 2 * i)
    log.close()
    assert (d / f"{40:020d}.snapshot").exists()  # named by the offset it covers
    log = Log(d, small_config())
    decision, _ = _produce(log, 38)
    assert decision.verdict == Verdict.DUPLICATE and decision.base_offset == 38
    assert _produce(log, 41)[0].verdict == Verdict.OUT_OF_ORDER_SEQUENCE
    assert _produce(log, 40)[1] == 40
    log.close()


def test_state_survives_kill_by_replay(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = Log(d, small_config())
    for i in range(30):
        _produce(log, 2 * i)
    _produce(log, 0, pid=7)
    crash(log)
    for snap in d.glob("*.snapshot"):  # no snapshot at all: replay the whole log
        snap.unlink()
    log = Log(d, small_config(), recovery_point=0, clean_shutdown=False)
    assert log.producer_state.map_end_offset == 62
    decision, _ = _produce(log, 56)
    assert decision.verdict == Verdict.DUPLICATE and decision.base_offset == 56
    assert _produce(log, 0, pid=7)[0].verdict == Verdict.DUPLICATE
    assert _produce(log, 60)[1] == 62
    log.close()


def test_state_after_unclean_stop_uses_roll_snapshot_then_replays(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = Log(d, small_config())
    for i in range(30):
        _produce(log, 2 * i)
    assert list(d.glob("*.snapshot"))  # taken on roll
    crash(log)
    log = Log(d, small_config(), clean_shutdown=False)
    assert _produce(log, 58)[0].verdict == Verdict.DUPLICATE
    assert _produce(log, 60)[1] == 60
    log.close()


def test_truncation_reloads_state(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", small_config())
    for i in range(30):
        _produce(log, 2 * i)
    log.truncate_to(40)
    # batches with sequence >= 40 are gone: 40 is next again, 38 is a duplicate
    assert _produce(log, 38)[0].verdict == Verdict.DUPLICATE
    assert _produce(log, 40)[1] == 40
    log.close()


def test_corrupt_snapshot_is_ignored(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = Log(d, small_config())
    for i in range(10):
        _produce(log, 2 * i)
    log.close()
    snap = d / f"{20:020d}.snapshot"
    data = bytearray(snap.read_bytes())
    data[-1] ^= 0xFF
    snap.write_bytes(bytes(data))
    log = Log(d, small_config())
    assert _produce(log, 18)[0].verdict == Verdict.DUPLICATE  # rebuilt by replay
    log.close()


def test_idle_producers_expire_by_wall_clock(tmp_path: Path) -> None:
    ps = ProducerStateManager(tmp_path, expiration_ms=1000)
    _, h = _batch(0)  # record timestamps from 1970 do not matter
    ps.update(h, 0, now_ms=10_000)
    assert ps.remove_expired(now_ms=10_500) == 0
    assert ps.remove_expired(now_ms=11_001) == 1 and not ps.producers


def _marker(log: Log, pid: int, coordinator_epoch: int) -> None:
    from kafkaproto.batch import parse_header
    from kafkaproto.control import build_marker

    batch = build_marker(pid, 0, commit=True, coordinator_epoch=coordinator_epoch, timestamp_ms=1000)
    log.append(memoryview(batch), parse_header(batch))


def test_coordinator_epochs_survive_snapshots_and_replay(tmp_path: Path) -> None:
    """Each producer's last marker's coordinator epoch: in the roll snapshots, rebuilt
    from the markers after them after a kill, in the clean-close snapshot, and replayed
    from the log when the snapshot is of the format before it (version 2)."""
    import struct

    d = tmp_path / "t-0"
    log = Log(d, small_config())
    _marker(log, 7, 3)
    for i in range(30):  # rolls: snapshots holding producer 7 at coordinator epoch 3
        _produce(log, 2 * i)
    _marker(log, 7, 8)
    _marker(log, 9, 2)
    assert log.snapshot_files()
    crash(log)
    log = Log(d, small_config(), recovery_point=0, clean_shutdown=False)
    ps = log.producer_state
    assert (ps.coordinator_epoch(7), ps.coordinator_epoch(9), ps.coordinator_epoch(PID)) == (8, 2, -1)
    log.close()
    log = Log(d, small_config())
    assert (log.producer_state.coordinator_epoch(7), log.producer_state.coordinator_epoch(9)) == (8, 2)
    log.close()
    for snap in d.glob("*.snapshot"):
        data = bytearray(snap.read_bytes())
        struct.pack_into(">H", data, 4, 2)  # an older server's format: passed over
        snap.write_bytes(bytes(data))
    log = Log(d, small_config())
    assert (log.producer_state.coordinator_epoch(7), log.producer_state.coordinator_epoch(9)) == (8, 2)
    assert _produce(log, 60)[1] is not None
    log.close()
