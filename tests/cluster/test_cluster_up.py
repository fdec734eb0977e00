"""``logserver cluster up``: three brokers and a local etcd from one command, used by a
real client (confluent-kafka), and all stopped by one SIGTERM."""

from __future__ import annotations

import json
import re
import sys

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from helpers.clusterprocs import own_metadata, stored_cluster_id
from helpers.serverproc import HOST, can_connect
from helpers.waiting import wait_until

from logserver.childproc import ChildProcess, free_port_run, python_path_env

pytestmark = pytest.mark.slow


def _brokers_in_metadata(admin: AdminClient) -> int:
    """How many brokers Metadata lists; 0 while the brokers are still starting (librdkafka
    then raises _PARTIAL or _TRANSPORT instead of answering)."""
    try:
        return len(admin.list_topics(timeout=5).brokers)
    except KafkaException:
        return 0


def test_cluster_up_starts_three_brokers_and_stops_them(tmp_path):
    base, etcd_port = free_port_run(3), free_port_run(2)
    launcher = ChildProcess(tmp_path / "cluster-up.log", env=python_path_env(), argv=[
        sys.executable, "-m", "logserver", "cluster", "up", "--nodes", "3",
        "--dir", str(tmp_path / "data"), "--base-port", str(base),
        "--etcd-port", str(etcd_port), "--override", "broker.session.timeout.ms=3000"])
    launcher.start()
    try:
        bootstrap = ",".join(f"{HOST}:{base + i}" for i in range(3))
        admin = AdminClient({"bootstrap.servers": bootstrap})
        wait_until(lambda: _brokers_in_metadata(admin) == 3, 60,
                   f"three brokers in Metadata\n{launcher.tail()}")
        admin.create_topics([NewTopic("up", 1, 3)])["up"].result(timeout=20)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(10):
            producer.produce("up", value=b"v%d" % i, partition=0)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "up-check",
                             "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition("up", 0, 0)])
            got: list[bytes] = []
            wait_until(lambda: (m := consumer.poll(0.2)) is not None and m.error() is None
                       and got.append(m.value()) is None and len(got) == 10, 30, "ten records")
            assert got == [b"v%d" % i for i in range(10)]
        finally:
            consumer.close()
    finally:
        code = launcher.stop(timeout=120)
    assert code == 0, launcher.tail()
    assert not any(can_connect(port) for port in (base, base + 1, base + 2, etcd_port))
    for node in (1, 2, 3):
        assert "stopped cleanly" in (tmp_path / "data" / f"node{node}.log").read_text()


def test_cluster_up_says_up_only_once_every_broker_has_joined(tmp_path):
    """The "cluster up" line comes once every broker has joined: each answers Metadata
    itself, listing all three under the one cluster id, the id in every meta.properties."""
    base, etcd_port = free_port_run(3), free_port_run(2)
    launcher = ChildProcess(tmp_path / "cluster-up.log", env=python_path_env(), argv=[
        sys.executable, "-m", "logserver", "cluster", "up", "--nodes", "3",
        "--dir", str(tmp_path / "data"), "--base-port", str(base),
        "--etcd-port", str(etcd_port), "--override", "broker.session.timeout.ms=3000"])
    launcher.start()
    try:
        line = wait_until(lambda: next((li for li in launcher.output().splitlines()
                                        if "cluster up:" in li), None), 90,
                          f"the cluster up line\n{launcher.tail()}")
        found = re.search(r"3 brokers joined cluster (\S+),", line)
        assert found is not None, line
        cluster_id = found.group(1)
        for i in range(3):  # at once, no waiting: they have all joined
            assert own_metadata(base + i) == (cluster_id, [1, 2, 3]), i
            assert stored_cluster_id(tmp_path / "data" / f"node{i + 1}") == cluster_id
    finally:
        code = launcher.stop(timeout=120)
    assert code == 0, launcher.tail()


def test_cluster_up_logs_in_the_projects_one_format(tmp_path):
    """--log-format json: the command's own lines and every broker's are JSON lines, as
    `logserver --log-format json` writes them (one collector reads them all)."""
    base, etcd_port = free_port_run(1), free_port_run(2)
    launcher = ChildProcess(tmp_path / "cluster-up.log", env=python_path_env(), argv=[
        sys.executable, "-m", "logserver", "cluster", "up", "--nodes", "1",
        "--dir", str(tmp_path / "data"), "--base-port", str(base),
        "--etcd-port", str(etcd_port), "--log-format", "json",
        "--override", "broker.session.timeout.ms=3000"])
    launcher.start()
    try:
        admin = AdminClient({"bootstrap.servers": f"{HOST}:{base}"})
        wait_until(lambda: _brokers_in_metadata(admin) == 1, 60,
                   f"the broker in Metadata\n{launcher.tail()}")
    finally:
        code = launcher.stop(timeout=120)
    assert code == 0, launcher.tail()
    own = _json_lines(launcher.output())
    assert any(r["logger"] == "logserver.cluster.local" and r["msg"].startswith("cluster up:")
               for r in own), own
    assert any(r["msg"] == "cluster stopped" for r in own), own
    broker = _json_lines((tmp_path / "data" / "node1.log").read_text())
    assert any(r["msg"] == "stopped cleanly" for r in broker), broker[-5:]


def _json_lines(text: str) -> list[dict]:
    """Every line of a log; each must be one JSON object with the project's fields
    (except the "===== exited with code N" notes childproc appends after a child's end)."""
    records = [json.loads(line) for line in text.splitlines()
               if line.strip() and not line.startswith("===== ")]
    assert records and all({"ts", "level", "logger", "msg"} <= r.keys() for r in records)
    return records
