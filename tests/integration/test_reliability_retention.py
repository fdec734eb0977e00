"""Retention and compaction on a real server: segments deleted by size and by time (never
the active one), the delete hook run with the deleted paths, the log start offset moving,
OFFSET_OUT_OF_RANGE below it and consumers resetting; compaction keeping the latest
record per key and tombstones for delete.retention.ms."""

from __future__ import annotations

import sys
import time

import pytest
from helpers.clienthelpers import ck_produce
from helpers.rawwire import Conn, parse_produce_v3_response, produce_v3, record_batch, request
from helpers.serverproc import run_cli

from kafkaproto import decode_response, encode_request
from kafkaproto.messages import CreateTopicsRequest, FetchRequest, ListOffsetsRequest

pytestmark = [pytest.mark.timeout(120)]

OFFSET_OUT_OF_RANGE = 1
FAST = {"log.retention.check.interval.ms": 200, "log.cleaner.backoff.ms": 200,
        "log.segment.bytes": 4096, "num.partitions": 1}


def _create(server, name: str, configs: dict[str, str]) -> None:
    req = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=1, replication_factor=1, assignments=[],
        configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])],
        timeout_ms=5000, validate_only=False)
    with Conn(server.port) as c:
        c.send(encode_request(19, 5, 1, "t", req))
        assert decode_response(19, 5, c.recv_frame())[1].topics[0].error_code == 0


def _fetch_error(server, topic: str, offset: int) -> int:
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                       isolation_level=0, session_id=0, session_epoch=-1, topics=[
                           FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                               partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])],
                       forgotten_topics_data=[])
    with Conn(server.port) as c:
        c.send(encode_request(1, 11, 1, "t", req))
        _, response = decode_response(1, 11, c.recv_frame())
    return response.responses[0].partitions[0].error_code


def _earliest(server, topic: str) -> int:
    req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-2)])])
    with Conn(server.port) as c:
        c.send(encode_request(2, 5, 1, "t", req))
        _, response = decode_response(2, 5, c.recv_frame())
    return response.topics[0].partitions[0].offset


def _consume_all(server, topic: str, start: int, reset: str) -> list:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "r",
                         "enable.auto.commit": False, "auto.offset.reset": reset})
    consumer.assign([TopicPartition(topic, 0, start)])
    out, idle = [], 0
    while idle < 4:
        msg = consumer.poll(0.5)
        if msg is None:
            idle += 1
            continue
        assert not msg.error(), msg.error()
        out.append((msg.offset(), msg.key(), msg.value()))
    consumer.close()
    return out


def _wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.1)


def test_retention_bytes_hook_and_out_of_range(server_factory, tmp_path):
    hook_log = tmp_path / "hook.txt"
    hook = tmp_path / "hook.py"
    hook.write_text("import sys, os\n"
                    f"with open({str(hook_log)!r}, 'a') as f:\n"
                    "    for p in sys.argv[1:]:\n"
                    "        f.write(p + ' ' + str(os.path.exists(p)) + '\\n')\n")
    server = server_factory(settings={**FAST, "log.retention.bytes": 12000,
                                      "log.segment.delete.hook": f"{sys.executable} {hook}"})
    values = [b"r%04d" % i + b"x" * 100 for i in range(400)]
    for start in range(0, 400, 10):
        ck_produce(server.bootstrap, "sized", [{"value": v} for v in values[start:start + 10]])
    _wait_for(lambda: sum(p.stat().st_size for p in server.segment_files("sized", 0))
              <= 12000 + 4096)  # retention.bytes, plus at most the active segment

    def settled() -> bool:  # no closed segment left that retention.bytes would delete
        sizes = [p.stat().st_size for p in server.segment_files("sized", 0)]
        return len(sizes) == 1 or sum(sizes) - sizes[0] < 12000

    _wait_for(settled)  # else the log start may still move between the reads below
    _wait_for(lambda: hook_log.exists() and hook_log.read_text().strip())
    start = _earliest(server, "sized")
    assert start > 0
    segments = server.segment_files("sized", 0)
    assert segments[0].name == f"{start:020d}.log"
    lines = hook_log.read_text().split("\n")
    assert all(line.endswith(".log.deleted True") for line in lines if line), lines
    _wait_for(lambda: not list(server.partition_dir("sized", 0).glob("*.deleted")))

    assert _fetch_error(server, "sized", 0) == OFFSET_OUT_OF_RANGE
    got = _consume_all(server, "sized", 0, "earliest")  # resets to the log start
    assert got[0][0] == start and [v for _, _, v in got] == values[start:]
    got = _consume_all(server, "sized", 0, "latest")  # or to the end
    assert got == []
    assert "retention deleted" in server.output()


@pytest.mark.alone  # its 200 ms retention pass races the segment count under load
def test_retention_ms_never_deletes_the_active_segment(server_factory):
    server = server_factory(settings=FAST)
    _create(server, "aged", {"retention.ms": "1000"})
    old = int(time.time() * 1000) - 3_600_000  # an hour-old CreateTime
    for start in range(0, 200, 10):
        ck_produce(server.bootstrap, "aged", [{"value": b"old%d" % i + b"y" * 100, "timestamp_ms": old}
                                              for i in range(start, start + 10)])
    _wait_for(lambda: len(server.segment_files("aged", 0)) == 1)
    # The active segment must survive later retention passes too. Witness: a second
    # topic's old segments deleted twice in a row; the pass that deletes the second lot
    # began after the first lot's pass ended, so after the check above.
    _create(server, "aged-witness", {"retention.ms": "1000"})
    for lot in range(2):
        for start in range(0, 100, 10):  # small batches, so that segments roll
            ck_produce(server.bootstrap, "aged-witness",
                       [{"value": b"w%d-%d" % (lot, i) + b"y" * 100, "timestamp_ms": old}
                        for i in range(start, start + 10)])
        assert len(server.segment_files("aged-witness", 0)) > 1
        _wait_for(lambda: len(server.segment_files("aged-witness", 0)) == 1)
    remaining = server.segment_files("aged", 0)
    assert len(remaining) == 1 and remaining[0].stat().st_size > 0
    start = _earliest(server, "aged")
    assert 0 < start < 200
    got = _consume_all(server, "aged", start, "earliest")
    assert [o for o, _, _ in got] == list(range(start, 200))


def test_compaction_keeps_latest_per_key_and_tombstones_for_a_while(server_factory):
    server = server_factory(settings=FAST)
    _create(server, "table", {"cleanup.policy": "compact", "delete.retention.ms": "3000"})
    expected: dict[bytes, bytes | None] = {}
    size_before = 0
    for round_ in range(30):
        batch = []
        for k in range(10):
            key = b"k%d" % k
            value = None if (k == 3 and round_ == 20) else b"v%d-%d" % (k, round_) + b"z" * 60
            if k == 3 and round_ > 20:
                continue  # k3 deleted at round 20 and never written again
            batch.append({"key": key, "value": value})
            expected[key] = value
        with Conn(server.port) as c:  # one batch per round: its size is exactly what is appended
            raw = record_batch([(r["key"], r["value"]) for r in batch])
            res = c.call(request(0, 3, round_, produce_v3("table", 0, raw)))
            assert res is not None and parse_produce_v3_response(res[1])[("table", 0)][0] == 0
        size_before += len(raw)
    # size_before is what was written, not what is on disk: compaction may already have run
    _wait_for(lambda: sum(p.stat().st_size for p in server.segment_files("table", 0))
              < size_before / 2)
    got = _consume_all(server, "table", 0, "earliest")
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    latest: dict[bytes, bytes | None] = {}
    for _, key, value in got:
        latest[key] = value
    assert latest == expected, "a reader of the compacted log sees the latest value per key"
    assert b"k3" in latest and latest[b"k3"] is None  # tombstone still there
    # after delete.retention.ms the tombstone itself goes (it sits in a closed segment)
    ck_produce(server.bootstrap, "table", [{"key": b"k0", "value": b"tick%d" % i + b"z" * 300}
                                           for i in range(30)])
    _wait_for(lambda: b"k3" not in {k for _, k, _ in _consume_all(server, "table", 0, "earliest")},
              timeout=20)
    assert server.stop() == 0
    assert run_cli(["check", str(server.data_dir)]).returncode == 0
    server.start()
    got = _consume_all(server, "table", 0, "earliest")
    assert {k for _, k, _ in got} == {b"k%d" % k for k in range(10)} - {b"k3"}
