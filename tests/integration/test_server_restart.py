"""Restart: topics, records and offsets survive a clean stop (SIGTERM) and a restart;
after kill -9 under fsync-every-append (log.flush.interval.messages=1) every
acknowledged record is still there exactly once, and the server starts by itself."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter

import pytest
from helpers.clienthelpers import (
    by_partition,
    ck_produce,
    create_topic,
    kp_admin,
    kp_close,
    kp_end_offsets,
    kp_produce,
    kp_producer,
    kp_read,
)

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]


def _topics(bootstrap: str) -> dict[str, int]:
    admin = kp_admin(bootstrap)
    try:
        return {t.get("name", t.get("topic")): len(t["partitions"]) for t in admin.describe_topics()}
    finally:
        admin.close()


def test_clean_restart_keeps_everything(server):
    create_topic(server.bootstrap, "keep-a", partitions=3)
    create_topic(server.bootstrap, "keep-b", partitions=1)
    a = kp_produce(server.bootstrap, "keep-a",
                   [{"key": f"k{i}".encode(), "value": f"a{i}".encode(),
                     "headers": [("h", b"1")], "timestamp_ms": 1_600_000_000_000 + i}
                    for i in range(1000)])
    b = kp_produce(server.bootstrap, "keep-b", [{"value": f"b{i}".encode()} for i in range(10)])
    ends_a = kp_end_offsets(server.bootstrap, "keep-a")

    assert server.stop() == 0, "SIGTERM must be a clean stop with exit code 0"
    server.start()

    topics = _topics(server.bootstrap)
    assert topics.get("keep-a") == 3 and topics.get("keep-b") == 1, topics
    assert kp_end_offsets(server.bootstrap, "keep-a") == ends_a
    assert sorted(kp_read(server.bootstrap, "keep-a")) == sorted(a)
    assert sorted(kp_read(server.bootstrap, "keep-b")) == sorted(b)

    # new appends continue after the old offsets (and an idempotent producer starts fine)
    more = kp_produce(server.bootstrap, "keep-b", [{"value": b"after"}])
    assert more[0].offset == 10

    # and a second restart (after appends to a recovered log) is just as clean
    assert server.stop() == 0
    server.start()
    assert [r.value for r in kp_read(server.bootstrap, "keep-b")][-2:] == [b"b9", b"after"]


def test_deleted_topic_stays_deleted_after_restart(server):
    create_topic(server.bootstrap, "gone", partitions=2)
    kp_produce(server.bootstrap, "gone", [{"value": b"x"}])
    admin = kp_admin(server.bootstrap)
    try:
        admin.delete_topics(["gone"], timeout_ms=10000)
    finally:
        admin.close()
    assert server.stop() == 0
    server.start()
    assert "gone" not in _topics(server.bootstrap)


def _produce_until_killed(server, topic: str, kill_after: float, prefix: str):
    """Idempotent kafka-python producer (acks=all) sending as fast as it can while the
    server is killed with SIGKILL after ``kill_after`` seconds. Returns
    (acked: {value: (partition, offset)}, sent values)."""
    acked: dict[bytes, tuple[int, int]] = {}
    lock = threading.Lock()
    producer = kp_producer(server.bootstrap, acks="all", linger_ms=2, retries=2,
                           request_timeout_ms=3000, delivery_timeout_ms=6000,
                           max_block_ms=3000, reconnect_backoff_max_ms=200)
    assert producer.config["enable_idempotence"]

    def on_ok(value):
        def cb(md):
            with lock:
                acked[value] = (md.partition, md.offset)
        return cb

    killer = threading.Timer(kill_after, server.kill9)
    killer.start()
    sent = []
    try:
        i = 0
        deadline = time.monotonic() + kill_after + 5
        while time.monotonic() < deadline and (server.running or i == 0):
            value = f"{prefix}-{i:07d}".encode()
            try:
                fut = producer.send(topic, key=f"k{i % 31}".encode(), value=value)
            except Exception:  # noqa: BLE001 - buffer full / metadata gone after the kill
                break
            fut.add_callback(on_ok(value))
            sent.append(value)
            i += 1
            if i % 200 == 0:
                time.sleep(0.005)
    finally:
        killer.join()
        kp_close(producer, timeout=2)
    with lock:
        return dict(acked), sent


@pytest.mark.parametrize(
    "durability",
    [{"log.flush.interval.messages": 1}, {}],
    ids=["fsync-every-append", "ack-after-write"],
)
def test_kill9_keeps_every_acknowledged_record(server_factory, durability, caplog):
    """kill -9 loses nothing acknowledged. With fsync-every-append that holds even for a
    power failure; with ack-after-write the page cache survives a process kill, so it
    must hold here too (only a machine crash may lose the unsynced tail)."""
    caplog.set_level(logging.CRITICAL, logger="kafka")  # connection errors are expected
    server = server_factory(settings=durability)
    topic = "crash"
    create_topic(server.bootstrap, topic, partitions=3)
    all_acked: dict[bytes, tuple[int, int]] = {}
    for round_ in range(2):  # crash, recover, crash again on the recovered log
        acked, sent = _produce_until_killed(server, topic, kill_after=1.5 + round_,
                                           prefix=f"r{round_}")
        assert len(acked) > 50, f"round {round_}: only {len(acked)} records acknowledged"
        print(f"round {round_}: sent {len(sent)}, acknowledged {len(acked)} before kill -9")
        overlap = set(acked) & set(all_acked)
        assert not overlap
        all_acked.update(acked)
        server.start()  # no manual repair: it must come up by itself

        read = kp_read(server.bootstrap, topic, timeout=120)
        counts = Counter(r.value for r in read)
        dups = {v: c for v, c in counts.items() if c > 1}
        assert not dups, f"records stored twice after recovery: {list(dups.items())[:5]}"
        where = {r.value: (r.partition, r.offset) for r in read}
        missing = [v for v in all_acked if v not in where]
        assert not missing, (f"round {round_}: {len(missing)} acknowledged records lost, "
                             f"e.g. {missing[:5]}")
        moved = {v: (all_acked[v], where[v]) for v in all_acked if where[v] != all_acked[v]}
        assert not moved, f"acknowledged records at other offsets: {list(moved.items())[:5]}"
        for p, recs in by_partition(read).items():
            assert [r.offset for r in recs] == list(range(len(recs))), f"gap in partition {p}"

    # the recovered log takes new writes at the right offsets
    ends = kp_end_offsets(server.bootstrap, topic)
    more = kp_produce(server.bootstrap, topic, [{"value": b"after", "partition": 0}])
    assert more[0].offset == ends[0]


def test_kill9_with_torn_tail_recovers(server_factory):
    """Garbage after the last complete batch (a torn write) is truncated on start-up;
    everything before it is kept and new appends follow it."""
    server = server_factory(settings={"log.flush.interval.messages": 1})
    create_topic(server.bootstrap, "torn", partitions=1)
    written = kp_produce(server.bootstrap, "torn",
                         [{"value": f"t{i}".encode()} for i in range(100)])
    server.kill9()
    segments = server.segment_files("torn", 0)  # fails when there is none: the layout is ours
    last = segments[-1]
    size = last.stat().st_size
    with open(last, "ab") as f:
        # a plausible batch header that promises more bytes than are there
        f.write((0).to_bytes(8, "big") + (5000).to_bytes(4, "big") + b"\x00" * 40)
    server.start()
    read = kp_read(server.bootstrap, "torn")
    assert sorted(read) == sorted(written)
    assert last.stat().st_size == size, "the torn tail was not cut back to the last whole batch"
    more = kp_produce(server.bootstrap, "torn", [{"value": b"after-torn"}])
    assert more[0].offset == 100
    assert [r.value for r in kp_read(server.bootstrap, "torn")][-1] == b"after-torn"


def test_kill9_with_corrupt_tail_batch_recovers(server_factory):
    """A complete-looking last batch whose CRC does not match is dropped on recovery.

    Default durability (no fsync): nothing is below the recovery point, so after an
    unclean stop the whole active segment is re-validated (as Kafka does). Under
    fsync-every-append a server may trust its flushed region, as Kafka does too."""
    server = server_factory()
    create_topic(server.bootstrap, "crc", partitions=1)
    kp_produce(server.bootstrap, "crc", [{"value": b"good-%d" % i} for i in range(20)])
    before = kp_read(server.bootstrap, "crc")
    kp_produce(server.bootstrap, "crc", [{"value": b"last-batch"}])
    server.kill9()
    segments = server.segment_files("crc", 0)
    last = segments[-1]
    data = bytearray(last.read_bytes())
    data[-3] ^= 0xFF  # inside the last record of the last batch
    last.write_bytes(bytes(data))
    server.start()
    read = kp_read(server.bootstrap, "crc")
    assert read == before, "a batch with a bad CRC survived recovery, or good data was lost"
    more = kp_produce(server.bootstrap, "crc", [{"value": b"after"}])
    assert more[0].offset == len(before)


def test_restart_after_confluent_idempotent_producer(server):
    """librdkafka's idempotent producer before and after a clean restart: no duplicates,
    offsets continue."""
    create_topic(server.bootstrap, "idem", partitions=1)
    first = ck_produce(server.bootstrap, "idem",
                       [{"value": b"one-%d" % i, "partition": 0} for i in range(100)],
                       **{"enable.idempotence": True})
    assert server.stop() == 0
    server.start()
    second = ck_produce(server.bootstrap, "idem",
                        [{"value": b"two-%d" % i, "partition": 0} for i in range(100)],
                        **{"enable.idempotence": True})
    assert [r.offset for r in first + second] == list(range(200))
    read = kp_read(server.bootstrap, "idem")
    assert [r.value for r in read] == [r.value for r in first + second]


@pytest.mark.parametrize("clean", [True, False], ids=["sigterm", "kill9"])
def test_producer_state_survives_restart(server_factory, clean):
    """An idempotent producer's last sequence survives a restart: a retry of the last
    batch after the restart is acknowledged with its original offset, not appended
    again; the next sequence continues; a gap is still rejected."""
    from helpers import rawwire as rw

    server = server_factory(settings={"log.flush.interval.messages": 1})
    create_topic(server.bootstrap, "pstate", partitions=1)

    def send(conn, pid, epoch, seq, values, corr):
        batch = rw.record_batch([(None, v) for v in values], producer_id=pid,
                                producer_epoch=epoch, base_sequence=seq)
        res = conn.call(rw.request(rw.API_PRODUCE, 3, corr, rw.produce_v3("pstate", 0, batch)))
        assert res is not None and res[0] == corr
        ((err, base),) = rw.parse_produce_v3_response(res[1]).values()
        return err, base

    with rw.Conn(server.port) as c:
        _, body = c.call(rw.request(rw.API_INIT_PRODUCER_ID, 0, 1, rw.init_producer_id_v0()))
        err, pid, epoch = rw.parse_init_producer_id_v0(body)
        assert err == 0
        assert send(c, pid, epoch, 0, [b"x0", b"x1"], 2) == (0, 0)
        assert send(c, pid, epoch, 2, [b"x2", b"x3"], 3) == (0, 2)

    if clean:
        assert server.stop() == 0
    else:
        server.kill9()
    server.start()

    with rw.Conn(server.port) as c:
        err, base = send(c, pid, epoch, 2, [b"x2", b"x3"], 4)  # retry of the last batch
        assert err in (0, rw.DUPLICATE_SEQUENCE_NUMBER), err
        if err == 0:
            assert base == 2
        assert send(c, pid, epoch, 4, [b"x4"], 5) == (0, 4)
        err, _ = send(c, pid, epoch, 9, [b"gap"], 6)
        assert err == rw.OUT_OF_ORDER_SEQUENCE_NUMBER, err
        # a new producer id is not the old one
        _, body = c.call(rw.request(rw.API_INIT_PRODUCER_ID, 0, 7, rw.init_producer_id_v0()))
        err2, pid2, _ = rw.parse_init_producer_id_v0(body)
        assert err2 == 0 and pid2 != pid, "producer id handed out twice across a restart"
    assert [r.value for r in kp_read(server.bootstrap, "pstate")] == [
        b"x0", b"x1", b"x2", b"x3", b"x4"]
