"""`logserver scram` on a cluster: with --cluster.etcd.endpoints it changes the cluster's
users in etcd while the brokers run (their watches apply it: the user logs in on every
broker, and a deleted one no more); on a cluster member's data directory without it, it
refuses in one line instead of editing a file no broker reads. Real etcd, 3 brokers with
SASL_PLAINTEXT listeners, confluent-kafka logging in."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException
from helpers.sasl_cluster import (
    MECHANISM,
    etcd_value,
)
from helpers.serverproc import HOST, free_port, run_cli
from helpers.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _logs_in(cluster, node: int, user: str, password: str) -> bool:
    """True once a Metadata request is answered after logging in to broker ``node``;
    False as soon as librdkafka reports the login refused."""
    refused: list[KafkaError] = []
    consumer = Consumer({"bootstrap.servers": f"{HOST}:{cluster.sasl_ports[node]}",
                         "group.id": "probe", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanisms": MECHANISM, "sasl.username": user,
                         "sasl.password": password,
                         "error_cb": lambda err: refused.append(err)
                         if err.code() == KafkaError._AUTHENTICATION else None})
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                consumer.list_topics(timeout=0.5)
                return True
            except KafkaException:
                consumer.poll(0)  # serves error_cb
                if refused:
                    return False
        raise AssertionError(f"broker {node} neither accepted nor refused {user}")
    finally:
        consumer.close()


def test_scram_cli_changes_the_cluster_users_in_etcd(secured, tmp_path) -> None:
    cluster = secured
    etcd = f"{cluster.etcd.host}:{cluster.etcd.port}"
    prefix = cluster.brokers[1].settings["cluster.etcd.prefix"]
    where = ["--cluster.etcd.endpoints", etcd, "--cluster.etcd.prefix", str(prefix)]
    secret = tmp_path / "dave.pw"
    secret.write_text("dave-pw\n")
    added = run_cli(["scram", "add", *where, "--user", "dave", "--mechanism", MECHANISM,
                     "--password-file", str(secret)])
    assert added.returncode == 0, added.stderr
    assert f"{prefix}/scram_credentials" in added.stdout
    assert list(json.loads(etcd_value(cluster, "scram_credentials"))["users"]) == ["dave"]
    for node in (1, 2, 3):
        wait_until(lambda n=node: _logs_in(cluster, n, "dave", "dave-pw"), 30,
                   f"dave logged in on broker {node}")
        assert not _logs_in(cluster, node, "dave", "wrong")
    assert not any((b.data_dir / "__scram_credentials.json").exists()
                   for b in cluster.brokers.values()), "no broker's file was written"

    listed = run_cli(["scram", "list", *where])
    assert listed.returncode == 0 and listed.stdout == f"dave\t{MECHANISM}\titerations=4096\n"

    deleted = run_cli(["scram", "delete", *where, "--user", "dave", "--mechanism", MECHANISM])
    assert deleted.returncode == 0, deleted.stderr
    for node in (1, 2, 3):
        wait_until(lambda n=node: not _logs_in(cluster, n, "dave", "dave-pw"), 30,
                   f"dave refused on broker {node}")
    again = run_cli(["scram", "delete", *where, "--user", "dave", "--mechanism", MECHANISM])
    assert again.returncode == 1 and "has no" in again.stderr

    # A member's data directory, without the endpoints: refused, in one line.
    cluster.brokers[3].stop()
    member = cluster.brokers[3].data_dir
    refused = run_cli(["scram", "add", "--data-dir", str(member), "--user", "erin",
                       "--mechanism", MECHANISM, "--password-file", str(secret)])
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "--cluster.etcd.endpoints" in refused.stderr \
        and "AlterUserScramCredentials" in refused.stderr, refused.stderr
    assert not (member / "__scram_credentials.json").exists()
    assert run_cli(["scram", "list", "--data-dir", str(member)]).returncode == 2


def test_scram_cli_reports_an_unreachable_etcd(tmp_path) -> None:
    proc = run_cli(["scram", "list", "--cluster.etcd.endpoints", f"127.0.0.1:{free_port()}"],
                   timeout=60)
    assert proc.returncode == 1 and "scram_credentials" in proc.stderr, proc.stderr
