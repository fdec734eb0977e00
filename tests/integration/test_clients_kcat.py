"""Debian's kcat (1.7.1 on librdkafka 2.0.2, the oldest librdkafka 2.x profile) against a
real logserver: -L (and -J), -P with keys and headers, -C from beginning / end /
timestamp, -e."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from helpers.clienthelpers import (
    create_topic,
    kcat,
    kcat_json_records,
    kcat_rec,
    kp_produce,
    kp_producer,
    kp_read,
)

pytestmark = [pytest.mark.timeout(120), pytest.mark.kcat]


def test_version(kcat_bin):
    out = subprocess.run([kcat_bin, "-V"], capture_output=True, text=True, timeout=10)
    assert out.returncode == 0
    assert "librdkafka" in out.stdout


def test_metadata_list(kcat_bin, module_server, topic_name):
    create_topic(module_server.bootstrap, topic_name, partitions=3)
    text = kcat(kcat_bin, module_server.bootstrap, "-L").stdout.decode()
    assert "1 brokers:" in text, text
    assert f"broker 1 at {module_server.bootstrap}" in text, text
    assert f'topic "{topic_name}" with 3 partitions:' in text, text
    for p in range(3):
        assert f"partition {p}, leader 1, replicas: 1, isrs: 1" in text, text

    meta = json.loads(kcat(kcat_bin, module_server.bootstrap, "-L", "-J").stdout)
    assert meta["brokers"] == [{"id": 1, "name": module_server.bootstrap}]
    (topic,) = [t for t in meta["topics"] if t["topic"] == topic_name]
    assert "error" not in topic, topic
    assert sorted(p["partition"] for p in topic["partitions"]) == [0, 1, 2]
    assert all(p["leader"] == 1 for p in topic["partitions"])

    one = json.loads(kcat(kcat_bin, module_server.bootstrap, "-L", "-J", "-t", topic_name).stdout)
    assert [t["topic"] for t in one["topics"]] == [topic_name]


def test_produce_keys_headers_consume_beginning(kcat_bin, module_server, topic_name):
    create_topic(module_server.bootstrap, topic_name, partitions=1)
    lines = b"".join(f"key{i}:value {i}\n".encode() for i in range(20))
    kcat(kcat_bin, module_server.bootstrap, "-P", "-t", topic_name, "-p", "0", "-K:",
         "-H", "origin=kcat", "-H", "n=1", input=lines)

    out = kcat(kcat_bin, module_server.bootstrap, "-C", "-t", topic_name, "-o", "beginning",
               "-e", "-J", timeout=60).stdout
    recs = [kcat_rec(d) for d in kcat_json_records(out)]
    assert [(r.offset, r.key, r.value) for r in recs] == [
        (i, f"key{i}".encode(), f"value {i}".encode()) for i in range(20)
    ]
    assert all(r.headers == (("origin", b"kcat"), ("n", b"1")) for r in recs), recs[0]

    # another client agrees, header bytes included
    other = kp_read(module_server.bootstrap, topic_name)
    assert [(r.offset, r.key, r.value, r.headers) for r in other] == [
        (r.offset, r.key, r.value, r.headers) for r in recs
    ]


def test_consume_formatted_plain(kcat_bin, module_server, topic_name):
    """The default (non-JSON) consumer output and -f formatting."""
    create_topic(module_server.bootstrap, topic_name, partitions=1)
    kp_produce(module_server.bootstrap, topic_name,
               [{"key": b"a", "value": b"1"}, {"key": b"b", "value": b"2"}])
    plain = kcat(kcat_bin, module_server.bootstrap, "-C", "-t", topic_name, "-e").stdout
    assert plain.split() == [b"1", b"2"]
    fmt = kcat(kcat_bin, module_server.bootstrap, "-C", "-t", topic_name, "-e",
               "-f", r"%p|%o|%k|%s\n").stdout
    assert fmt.decode().splitlines() == ["0|0|a|1", "0|1|b|2"]


def test_consume_from_end_gets_new_records_only(kcat_bin, module_server, topic_name):
    create_topic(module_server.bootstrap, topic_name, partitions=1)
    kp_produce(module_server.bootstrap, topic_name,
               [{"value": f"old-{i}".encode(), "partition": 0} for i in range(3)])
    cmd = [kcat_bin, "-b", module_server.bootstrap, "-C", "-t", topic_name, "-p", "0",
           "-o", "end", "-c", "1", "-J"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    producer = kp_producer(module_server.bootstrap)
    try:
        # kcat's start offset is resolved asynchronously: keep producing until it sees one
        n = 0
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            producer.send(topic_name, value=f"new-{n}".encode(), partition=0).get(timeout=15)
            n += 1
            time.sleep(0.3)
        out, err = proc.communicate(timeout=10)
    finally:
        producer.close(timeout=10)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    (rec,) = [kcat_rec(d) for d in kcat_json_records(out)]
    assert rec.value.startswith(b"new-"), rec
    assert rec.offset == 3 + int(rec.value[4:]), rec


def test_consume_from_timestamp(kcat_bin, module_server, topic_name):
    create_topic(module_server.bootstrap, topic_name, partitions=1)
    base = int(time.time() * 1000) - 86_400_000
    kp_produce(module_server.bootstrap, topic_name,
               [{"value": f"ts-{i}".encode(), "timestamp_ms": base + 1000 * i, "partition": 0}
                for i in range(10)])
    out = kcat(kcat_bin, module_server.bootstrap, "-C", "-t", topic_name, "-p", "0",
               "-o", f"s@{base + 6500}", "-e", "-J").stdout
    recs = [kcat_rec(d) for d in kcat_json_records(out)]
    assert [(r.offset, r.value, r.timestamp) for r in recs] == [
        (i, f"ts-{i}".encode(), base + 1000 * i) for i in range(7, 10)
    ]
    # exact timestamp hit
    out = kcat(kcat_bin, module_server.bootstrap, "-C", "-t", topic_name, "-p", "0",
               "-o", f"s@{base + 2000}", "-e", "-J").stdout
    assert [d["offset"] for d in kcat_json_records(out)] == list(range(2, 10))


def test_consume_absolute_and_relative_offsets(kcat_bin, module_server, topic_name):
    create_topic(module_server.bootstrap, topic_name, partitions=1)
    kp_produce(module_server.bootstrap, topic_name,
               [{"value": f"o{i}".encode(), "partition": 0} for i in range(10)])
    out = kcat(kcat_bin, module_server.bootstrap, "-C", "-t", topic_name, "-p", "0",
               "-o", "4", "-e", "-J").stdout
    assert [d["offset"] for d in kcat_json_records(out)] == list(range(4, 10))
    out = kcat(kcat_bin, module_server.bootstrap, "-C", "-t", topic_name, "-p", "0",
               "-o", "-3", "-e", "-J").stdout
    assert [d["offset"] for d in kcat_json_records(out)] == [7, 8, 9]


def test_exit_at_end_of_empty_topic(kcat_bin, module_server, topic_name):
    create_topic(module_server.bootstrap, topic_name, partitions=2)
    out = kcat(kcat_bin, module_server.bootstrap, "-C", "-t", topic_name, "-e",
               timeout=60).stdout  # -e: exits at the end (else the timeout fails the test)
    assert out == b""


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_produce_compressed(kcat_bin, module_server, topic_name, codec):
    create_topic(module_server.bootstrap, topic_name, partitions=1)
    lines = b"".join(f"{codec} line {i} {'z' * 50}\n".encode() for i in range(100))
    kcat(kcat_bin, module_server.bootstrap, "-P", "-t", topic_name, "-p", "0", "-z", codec,
         input=lines)
    out = kcat(kcat_bin, module_server.bootstrap, "-C", "-t", topic_name, "-e", "-J").stdout
    values = [d["payload"].encode() for d in kcat_json_records(out)]
    assert values == lines.splitlines()


def test_produce_auto_creates_topic(kcat_bin, module_server, topic_name):
    """kcat -P to an unknown topic: auto.create.topics.enable (default true) creates it
    with num.partitions (3 on module_server)."""
    kcat(kcat_bin, module_server.bootstrap, "-P", "-t", topic_name, input=b"auto\n")
    meta = json.loads(kcat(kcat_bin, module_server.bootstrap, "-L", "-J", "-t", topic_name).stdout)
    (topic,) = meta["topics"]
    assert len(topic["partitions"]) == 3
    out = kcat(kcat_bin, module_server.bootstrap, "-C", "-t", topic_name, "-e").stdout
    assert out.split() == [b"auto"]
