"""10,000 records over 3 partitions, with keys, headers and explicit timestamps, written
once by kafka-python: every client (kafka-python, aiokafka, confluent-kafka, kcat -J)
reads back exactly the records written, in order per partition.  Keys land where Kafka's
default partitioner (murmur2) puts them, and all clients agree on it."""

from __future__ import annotations

import time

import pytest
from helpers.clienthelpers import (
    Rec,
    aio_produce,
    aio_read,
    aio_run,
    by_partition,
    ck_produce,
    ck_read,
    create_topic,
    kcat,
    kcat_json_records,
    kcat_rec,
    kp_produce,
    kp_read,
)

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

N = 10_000
PARTITIONS = 3
TOPIC = "tenk"
BASE_TS = 1_700_000_000_000  # fixed, explicit CreateTime timestamps


def _items():
    for i in range(N):
        yield {
            "key": f"sensor-{i % 997}".encode(),
            "value": f"reading {i} " .encode() + bytes([65 + i % 26]) * (i % 64),
            "headers": [("seq", str(i).encode()), ("src", b"kafka-python")],
            "timestamp_ms": BASE_TS + i,
        }


@pytest.fixture(scope="module")
def written(module_server) -> list[Rec]:
    create_topic(module_server.bootstrap, TOPIC, partitions=PARTITIONS)
    recs = kp_produce(module_server.bootstrap, TOPIC, _items(),
                      producer_config={"linger_ms": 5, "batch_size": 32768})
    assert len(recs) == N
    return recs


@pytest.fixture(scope="module")
def end_offsets(written) -> dict[int, int]:
    return {p: len(v) for p, v in by_partition(written).items()}


def _assert_same(read: list[Rec], written: list[Rec], client: str) -> None:
    got, want = by_partition(read), by_partition(written)
    assert sorted(got) == sorted(want), f"{client}: partitions {sorted(got)} != {sorted(want)}"
    for p in want:
        g, w = got[p], want[p]
        assert len(g) == len(w), f"{client}: partition {p}: {len(g)} records, wrote {len(w)}"
        # in order per partition: offsets and the send order agree
        assert [r.offset for r in g] == list(range(len(w))), f"{client}: p{p} offsets"
        for a, b in zip(g, w, strict=True):
            assert a == b, f"{client}: partition {p} offset {b.offset}: read {a}, wrote {b}"


def test_written_layout(written):
    parts = by_partition(written)
    assert sorted(parts) == list(range(PARTITIONS))
    for p, recs in parts.items():
        assert [r.offset for r in recs] == list(range(len(recs))), p
        seqs = [int(r.headers[0][1]) for r in recs]
        assert seqs == sorted(seqs), f"partition {p} not in send order"
        assert all(r.timestamp == BASE_TS + int(r.headers[0][1]) for r in recs)


def test_keys_follow_murmur2(written):
    from kafka.partitioner.default import murmur2

    for r in written:
        assert r.partition == (murmur2(r.key) & 0x7FFFFFFF) % PARTITIONS, r


def test_kafka_python_reads_back(module_server, written, end_offsets):
    t0 = time.monotonic()
    read = kp_read(module_server.bootstrap, TOPIC, end=end_offsets, timeout=120)
    _assert_same(read, written, "kafka-python")
    print(f"kafka-python read {N} records in {time.monotonic() - t0:.2f}s")


def test_aiokafka_reads_back(module_server, written, end_offsets):
    read = aio_run(aio_read(module_server.bootstrap, TOPIC, end=end_offsets, timeout=120),
                   timeout=150)
    _assert_same(read, written, "aiokafka")


def test_confluent_reads_back(module_server, written, end_offsets):
    read = ck_read(module_server.bootstrap, TOPIC, range(PARTITIONS), end=end_offsets,
                   timeout=120)
    _assert_same(read, written, "confluent-kafka")


@pytest.mark.kcat
def test_kcat_reads_back(kcat_bin, module_server, written):
    out = kcat(kcat_bin, module_server.bootstrap, "-C", "-t", TOPIC, "-o", "beginning", "-e",
               "-J", timeout=120).stdout
    read = [kcat_rec(d) for d in kcat_json_records(out)]
    _assert_same(read, written, "kcat")


def test_clients_agree_on_partitions(module_server, written):
    """aiokafka and librdkafka (partitioner=murmur2_random, the Java-compatible one) put
    each key on the same partition as kafka-python did."""
    keys = sorted({r.key for r in written})
    want = {r.key: r.partition for r in written}
    items = [{"key": k, "value": b"agree"} for k in keys]

    create_topic(module_server.bootstrap, "agree-aiokafka", partitions=PARTITIONS)
    aio = aio_run(aio_produce(module_server.bootstrap, "agree-aiokafka", items))
    assert {r.key: r.partition for r in aio} == want, "aiokafka disagrees with kafka-python"

    create_topic(module_server.bootstrap, "agree-confluent", partitions=PARTITIONS)
    ck = ck_produce(module_server.bootstrap, "agree-confluent", items,
                    partitioner="murmur2_random")
    assert {r.key: r.partition for r in ck} == want, "librdkafka disagrees with kafka-python"


@pytest.mark.kcat
def test_kcat_partitioner_agrees(kcat_bin, module_server, written):
    keys = sorted({r.key for r in written})[:100]
    want = {r.key: r.partition for r in written}
    create_topic(module_server.bootstrap, "agree-kcat", partitions=PARTITIONS)
    lines = b"".join(k + b":agree\n" for k in keys)
    kcat(kcat_bin, module_server.bootstrap, "-P", "-t", "agree-kcat", "-K:",
         "-X", "partitioner=murmur2_random", input=lines)
    out = kcat(kcat_bin, module_server.bootstrap, "-C", "-t", "agree-kcat", "-e", "-J").stdout
    got = {kcat_rec(d).key: d["partition"] for d in kcat_json_records(out)}
    assert got == {k: want[k] for k in keys}
