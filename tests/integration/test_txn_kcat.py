"""kcat (Debian's, librdkafka 2.0.2) reading a topic with committed and aborted
transactions: read_committed shows only the committed records, read_uncommitted all."""

from __future__ import annotations

import subprocess

from helpers.txn_clients import create_topics, txn_producer


def _kcat(kcat_bin: str, server, topic: str, isolation: str) -> list[str]:
    out = subprocess.run([kcat_bin, "-b", server.bootstrap, "-C", "-t", topic, "-p", "0",
                          "-o", "beginning", "-e", "-q", "-X", f"isolation.level={isolation}",
                          "-f", r"%s\n"], capture_output=True, timeout=60, check=True).stdout
    return out.decode().splitlines()


def test_kcat_read_committed_skips_aborted(kcat_bin, server, topic_name):
    create_topics(server, topic_name, partitions=1)
    producer = txn_producer(server, f"tx-{topic_name}")
    for outcome in ("commit", "abort", "commit"):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic_name, value=f"{outcome}-{i}".encode())
        producer.flush(10)
        if outcome == "commit":
            producer.commit_transaction(15)
        else:
            producer.abort_transaction(15)
    committed = [f"commit-{i}" for i in range(3)]
    assert _kcat(kcat_bin, server, topic_name, "read_committed") == committed + committed
    assert _kcat(kcat_bin, server, topic_name, "read_uncommitted") == (
        committed + [f"abort-{i}" for i in range(3)] + committed)
