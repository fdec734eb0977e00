"""Consume from the middle of a log that spans several segments
(``log.segment.bytes=65536``), with every client, before and after a restart."""

from __future__ import annotations

import re

import pytest
from helpers.clienthelpers import (
    aio_read,
    aio_run,
    ck_read,
    create_topic,
    kcat,
    kcat_json_records,
    kcat_rec,
    kp_produce,
    kp_read,
)

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

TOPIC = "segmented"
N = 3000  # ~300 B per record: ~900 KB, about 14 segments of 64 KiB
BASE_TS = 1_650_000_000_000  # record i has timestamp BASE_TS + 10 * i


@pytest.fixture(scope="module")
def seg_server(request, tmp_path_factory):
    from helpers.serverproc import ServerProcess

    base = tmp_path_factory.mktemp("segments")
    srv = ServerProcess(base / "data", settings={"log.segment.bytes": 65536})
    request.addfinalizer(srv.stop)
    srv.start()
    return srv


@pytest.fixture(scope="module")
def written(seg_server):
    create_topic(seg_server.bootstrap, TOPIC, partitions=1)
    items = [{"key": f"k{i}".encode(), "value": f"{i:06d}|".encode() + b"s" * 250,
              "headers": [("i", str(i).encode())], "timestamp_ms": BASE_TS + 10 * i}
             for i in range(N)]
    # small batches so that segments can roll between them
    recs = kp_produce(seg_server.bootstrap, TOPIC, items,
                      producer_config={"batch_size": 8192, "linger_ms": 2})
    assert [r.offset for r in recs] == list(range(N))
    return recs


def _segment_bases(server) -> list[int]:
    return _segment_bases_of(server, TOPIC)


def _segment_bases_of(server, topic: str) -> list[int]:
    files = server.segment_files(topic, 0)
    bases = []
    for f in files:
        m = re.fullmatch(r"(\d+)\.log", f.name)
        if m:
            bases.append(int(m.group(1)))
    return sorted(bases)


def test_log_has_several_segments(seg_server, written):
    files = seg_server.segment_files(TOPIC, 0)  # fails when there is none: the layout is ours
    assert len(files) >= 5, f"expected several segments, got {[f.name for f in files]}"
    assert all(f.stat().st_size <= 65536 + 16384 for f in files[:-1]), \
        [(f.name, f.stat().st_size) for f in files]


def _starts(server) -> list[int]:
    """Offsets to start from: middle, segment boundaries and their neighbours."""
    starts = {1, N // 2, N - 1}
    for b in _segment_bases(server)[1:4]:
        starts |= {b - 1, b, b + 1}
    return sorted(s for s in starts if 0 <= s < N)


def test_kafka_python_from_middle(seg_server, written):
    for start in _starts(seg_server):
        read = kp_read(seg_server.bootstrap, TOPIC, start=start, end={0: N})
        assert read == written[start:], f"start {start}"


def test_confluent_from_middle(seg_server, written):
    for start in _starts(seg_server)[:5]:
        read = ck_read(seg_server.bootstrap, TOPIC, [0], start=start, end={0: N})
        assert read == written[start:], f"start {start}"


def test_aiokafka_from_middle(seg_server, written):
    start = _starts(seg_server)[len(_starts(seg_server)) // 2]
    read = aio_run(aio_read(seg_server.bootstrap, TOPIC, start=start, end={0: N}))
    assert read == written[start:], f"start {start}"


@pytest.mark.kcat
def test_kcat_from_middle(kcat_bin, seg_server, written):
    for start in _starts(seg_server)[:4]:
        out = kcat(kcat_bin, seg_server.bootstrap, "-C", "-t", TOPIC, "-p", "0",
                   "-o", str(start), "-e", "-J").stdout
        read = [kcat_rec(d) for d in kcat_json_records(out)]
        assert [(r.offset, r.value) for r in read] == [(r.offset, r.value)
                                                       for r in written[start:]]


def test_offsets_for_times_across_segments(seg_server, written):
    """The time index of every segment is used: a timestamp in any segment finds the
    first record at or after it."""
    from helpers.clienthelpers import kp_consumer
    from kafka import TopicPartition

    tp = TopicPartition(TOPIC, 0)
    consumer = kp_consumer(seg_server.bootstrap)
    try:
        probes = sorted({0, 1, 5, N // 3, N // 2, N - 2, N - 1, *_starts(seg_server)})
        for i in probes:
            found = consumer.offsets_for_times({tp: BASE_TS + 10 * i})[tp]
            assert (found.offset, found.timestamp) == (i, BASE_TS + 10 * i), i
            found = consumer.offsets_for_times({tp: BASE_TS + 10 * i - 5})[tp]
            assert found.offset == i, f"timestamp between records {i - 1} and {i}"
        assert consumer.offsets_for_times({tp: BASE_TS + 10 * N})[tp] is None
    finally:
        consumer.close()


@pytest.mark.kcat
def test_kcat_from_timestamp_across_segments(kcat_bin, seg_server, written):
    i = _starts(seg_server)[-2]
    out = kcat(kcat_bin, seg_server.bootstrap, "-C", "-t", TOPIC, "-p", "0",
               "-o", f"s@{BASE_TS + 10 * i}", "-c", "3", "-e", "-J").stdout
    assert [d["offset"] for d in kcat_json_records(out)] == [i, i + 1, i + 2]


def test_roll_by_time(server_factory):
    """log.roll.ms rolls the active segment once it is older than the setting. Its age is
    told by the record timestamps (Kafka's LogSegment.shouldRoll), so the records carry
    timestamps 0.5 s and 1.6 s after the first one instead of the test waiting."""
    srv = server_factory(settings={"log.roll.ms": 1000})
    create_topic(srv.bootstrap, "timeroll", partitions=1)
    for value, ts in ((b"first", BASE_TS), (b"second", BASE_TS + 500), (b"third", BASE_TS + 1600)):
        kp_produce(srv.bootstrap, "timeroll", [{"value": value, "timestamp_ms": ts}])
    assert _segment_bases_of(srv, "timeroll") == [0, 2]  # rolled before "third" only
    assert [r.value for r in kp_read(srv.bootstrap, "timeroll")] == [b"first", b"second", b"third"]


def test_from_middle_after_restart(seg_server, written):
    """Indexes of the rolled segments are reopened (or rebuilt) after a clean restart;
    after a kill -9 they are untrusted and rebuilt: reads from the middle still work."""
    starts = _starts(seg_server)
    assert seg_server.stop() == 0
    seg_server.start()
    for start in starts[::2]:
        assert kp_read(seg_server.bootstrap, TOPIC, start=start, end={0: N}) == written[start:]
    seg_server.kill9()
    seg_server.start()
    for start in starts[1::2]:
        assert kp_read(seg_server.bootstrap, TOPIC, start=start, end={0: N}) == written[start:]
    more = kp_produce(seg_server.bootstrap, TOPIC, [{"value": b"tail"}])
    assert more[0].offset == N
