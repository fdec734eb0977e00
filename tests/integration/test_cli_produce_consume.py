"""``logserver produce`` / ``logserver consume`` against a real server, each checked with
a real client on the other side (kafka-python)."""

from __future__ import annotations

import json
import time

import pytest
from helpers.admin_cli import json_lines, logserver, ok, one_error_line
from helpers.clienthelpers import by_partition, create_topic, kcat, kp_produce, kp_read

pytestmark = pytest.mark.timeout(120)


def test_produce_lines_read_by_kafka_python(module_server, topic_name) -> None:
    b = module_server.bootstrap
    create_topic(b, topic_name, partitions=3)
    lines = "".join(f"dev-{i % 4}:reading {i}\n" for i in range(20))
    placed = json_lines(ok("produce", topic_name, "--key-separator", ":", "-H", "source=cli",
                           "--json", "-b", b, input=lines))
    assert len(placed) == 20

    got = kp_read(b, topic_name)
    assert sorted((r.key, r.value) for r in got) == sorted(
        (f"dev-{i % 4}".encode(), f"reading {i}".encode()) for i in range(20))
    assert all(r.headers == (("source", b"cli"),) for r in got)
    assert sorted((r.partition, r.offset) for r in got) == sorted(
        (p["partition"], p["offset"]) for p in placed)

    # Keyed records land where kafka-python's default partitioner puts the same keys.
    theirs = kp_produce(b, topic_name, [{"key": f"dev-{i}".encode(), "value": b"kp"}
                                        for i in range(4)])
    ours = {r.key: r.partition for r in got}
    assert {r.key: r.partition for r in theirs} == ours


def test_produce_to_a_partition_with_a_key(module_server, topic_name) -> None:
    b = module_server.bootstrap
    create_topic(b, topic_name, partitions=3)
    out = ok("produce", topic_name, "-k", "fixed", "-p", "2", "-b", b, input="one\ntwo\n")
    assert out.splitlines() == ["Produced to partition 2 at offset 0",
                                "Produced to partition 2 at offset 1"]
    got = by_partition(kp_read(b, topic_name))
    assert [(r.key, r.value) for r in got[2]] == [(b"fixed", b"one"), (b"fixed", b"two")]
    assert set(got) == {2}

    bad = logserver("produce", topic_name, "-p", "7", "-b", b, input="x\n")
    assert bad.returncode == 1
    assert one_error_line(bad) == f"logserver: topic '{topic_name}' has no partition 7 (it has 3)"


def test_consume_what_kafka_python_wrote(module_server, topic_name) -> None:
    b = module_server.bootstrap
    create_topic(b, topic_name, partitions=2)
    sent = kp_produce(b, topic_name, [
        {"key": b"k%d" % i, "value": b"value %d" % i, "partition": i % 2,
         "headers": [("h", b"%d" % i)]} for i in range(10)])

    result = logserver("consume", topic_name, "--from-beginning", "-n", "10", "--json", "-b", b)
    assert result.returncode == 0, result.stderr
    records = json_lines(result.stdout)
    assert sorted((r["partition"], r["offset"], r["key"], r["value"], r["headers"]["h"])
                  for r in records) == sorted(
        (s.partition, s.offset, s.key.decode(), s.value.decode(), s.headers[0][1].decode())
        for s in sent)
    assert result.stderr.strip() == "Processed a total of 10 messages"

    three = ok("consume", topic_name, "--from-beginning", "-n", "3", "-p", "1", "--print-key",
               "-b", b)
    assert three.splitlines() == ["k1\tvalue 1", "k3\tvalue 3", "k5\tvalue 5"]
    at = ok("consume", topic_name, "-p", "0", "--offset", "3", "-n", "1", "-b", b)
    assert at.splitlines() == ["value 6"]  # partition 0 holds 0, 2, 4, 6, 8


def test_consume_from_the_end_waits_for_new_records(module_server, topic_name) -> None:
    b = module_server.bootstrap
    create_topic(b, topic_name, partitions=1)
    kp_produce(b, topic_name, [{"value": b"old"}])
    result = logserver("consume", topic_name, "--timeout-ms", "1500", "-b", b)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and "Processed a total of 0 messages" in result.stderr


def test_consume_an_unknown_topic(module_server, topic_name) -> None:
    result = logserver("consume", topic_name, "-n", "1", "-b", module_server.bootstrap)
    assert result.returncode == 1
    assert one_error_line(result) == f"logserver: unknown topic '{topic_name}'"


def test_produce_creates_a_topic_on_first_use_and_compresses(module_server, topic_name) -> None:
    """As Kafka's console producer: a topic the server creates on first use (here with
    the server's 3 partitions); --compression and --acks 0 reach a real reader intact."""
    b = module_server.bootstrap
    out = ok("produce", topic_name, "-k", "a", "--compression", "zstd", "-b", b,
             input="x" * 1000 + "\n")
    assert out.startswith("Produced to partition "), out
    assert ok_json_topic_partitions(b, topic_name) == 3
    result = logserver("produce", topic_name, "-k", "a", "--acks", "0", "-b", b, input="fire\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Produced to partition ") and "offset" not in result.stdout

    def both() -> list:
        got = kp_read(b, topic_name, timeout=10)
        return got if len(got) == 2 else []

    deadline = time.monotonic() + 30
    while not (got := both()):
        assert time.monotonic() < deadline, "the acks=0 record never arrived"
        time.sleep(0.1)
    assert [r.value for r in sorted(got, key=lambda r: r.offset)] == [b"x" * 1000, b"fire"]


def ok_json_topic_partitions(bootstrap: str, topic: str) -> int:
    return len(json.loads(ok("topic", "describe", topic, "--json", "-b", bootstrap))["partitions"])


def test_consume_format_prints_what_kcat_prints(module_server, topic_name, kcat_bin) -> None:
    """--format takes kcat's -f strings: the same records print byte for byte as kcat
    prints them (keyed, unkeyed, with headers, on two partitions); 'json' is --json."""
    b = module_server.bootstrap
    create_topic(b, topic_name, partitions=2)
    kp_produce(b, topic_name, [
        {"key": b"k1", "value": b"v1", "partition": 0, "headers": [("src", b"a"), ("n", b"1")]},
        {"key": None, "value": b"no key", "partition": 1},
        {"key": b"k3", "value": b"", "partition": 1, "headers": [("src", b"b")]}])
    fmt = r"%t|%p|%o|%T|%k|%s|%K|%S|%h|100%%\n"
    ours = logserver("consume", topic_name, "--from-beginning", "-n", "3", "--format", fmt,
                     "-b", b)
    assert ours.returncode == 0, ours.stderr
    theirs = kcat(kcat_bin, b, "-C", "-t", topic_name, "-o", "beginning", "-e", "-q",
                  "-f", fmt)
    lines = sorted(ours.stdout.splitlines())
    assert lines == sorted(theirs.stdout.decode().splitlines()), (lines, theirs.stdout)
    assert len(lines) == 3 and f"{topic_name}|0|0|" in lines[0], lines
    as_json = json_lines(ok("consume", topic_name, "--from-beginning", "-n", "3",
                            "--format", "json", "-b", b))
    assert sorted(r["value"] for r in as_json) == ["", "no key", "v1"]
    bad = logserver("consume", topic_name, "--format", "%q", "-b", b)
    assert bad.returncode == 2 and "unknown token %q" in one_error_line(bad)
