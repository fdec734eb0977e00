"""``logserver cluster up``: three brokers and a local etcd from one command, used by a
real client (confluent-kafka), and all stopped by one SIGTERM."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sys
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from helpers.clusterprocs import own_metadata, stored_cluster_id
from helpers.serverproc import HOST, can_connect
from helpers.waiting import wait_until

from commonlib.childproc import ChildProcess, free_port_run, python_path_env

pytestmark = pytest.mark.slow


def _brokers_in_metadata(admin: AdminClient) -> int:
    """How many brokers Metadata lists; 0 while the brokers are still starting (librdkafka
    then raises _PARTIAL or _TRANSPORT instead of answering)."""
    try:
        return len(admin.list_topics(timeout=5).brokers)
    except KafkaException:
        return 0


def test_cluster_up_starts_three_brokers_and_stops_them(tmp_path):
    launcher, base, _, etcd_port = _launcher(tmp_path, 3)
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
    launcher, base, _, _ = _launcher(tmp_path, 3)
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
    launcher, _, _, _ = _launcher(tmp_path, 1, "--log-format", "json")
    launcher.start()
    try:
        _line(launcher, "cluster up:")
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


def _launcher(tmp_path, nodes: int, *extra: str) -> tuple[ChildProcess, int, int, int]:
    """A `cluster up` of ``nodes`` brokers on ports of this test's own (Kafka, admin API,
    etcd; the REST Proxy off), not started yet; (launcher, Kafka base port, admin base
    port, etcd port)."""
    base, admin_base, etcd_port = free_port_run(nodes), free_port_run(nodes), free_port_run(2)
    launcher = ChildProcess(tmp_path / "cluster-up.log", env=python_path_env(), argv=[
        sys.executable, "-m", "logserver", "cluster", "up", "--nodes", str(nodes),
        "--dir", str(tmp_path / "data"), "--base-port", str(base),
        "--admin-base-port", str(admin_base), "--rest-base-port", "0",
        "--etcd-port", str(etcd_port), "--override", "broker.session.timeout.ms=3000", *extra])
    return launcher, base, admin_base, etcd_port


def _line(launcher: ChildProcess, text: str, timeout: float = 90) -> str:
    return wait_until(lambda: next((li for li in launcher.output().splitlines() if text in li),
                                   None), timeout, f"a line with {text!r}\n{launcher.tail()}")


def test_cluster_up_restarts_a_broker_killed_and_sigint_stops_all(tmp_path):
    """kill -9 of one broker: reported, restarted with backoff, it rejoins and the cluster
    serves acks=all writes; the others ran on throughout. Each broker has its own admin
    API, named with its Kafka address. SIGINT (Ctrl-C) then stops every child."""
    launcher, base, admin_base, _ = _launcher(tmp_path, 3)
    launcher.start()
    try:
        _line(launcher, "cluster up:")
        for node in (1, 2, 3):
            line = _line(launcher, f"node {node}: Kafka {HOST}:{base + node - 1}")
            assert f"admin API http://{HOST}:{admin_base + node - 1}" in line, line
            body = json.loads(urllib.request.urlopen(
                f"http://{HOST}:{admin_base + node - 1}/v1/cluster", timeout=10).read())
            assert len(body["brokers"]) == 3, body
        pids = _broker_pids(launcher.pid)
        assert sorted(pids) == [1, 2, 3], pids
        os.kill(pids[2], signal.SIGKILL)
        _line(launcher, f"node 2 (pid {pids[2]}) died (killed by SIGKILL); restarting it in")
        _line(launcher, "node 2 rejoined the cluster", 120)
        now = _broker_pids(launcher.pid)
        assert now[1] == pids[1] and now[3] == pids[3] and now[2] != pids[2], (pids, now)
        bootstrap = ",".join(f"{HOST}:{base + i}" for i in range(3))
        assert own_metadata(base + 1)[1] == [1, 2, 3]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("after", 1, 3)])["after"].result(timeout=30)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        producer.produce("after", value=b"x")
        assert producer.flush(30) == 0
        os.kill(launcher.pid, signal.SIGINT)
        code = launcher.proc.wait(120)
    finally:
        launcher.stop(timeout=120)
    assert code == 0, launcher.tail()
    assert "cluster stopped" in launcher.output()
    assert not any(can_connect(port) for port in
                   (base, base + 1, base + 2, admin_base, admin_base + 1, admin_base + 2))
    assert _broker_pids(launcher.pid) == {}
    for pid in (*pids.values(), *now.values()):
        assert not _alive(pid), pid


def test_cluster_up_says_in_one_line_that_a_port_is_taken(tmp_path):
    """A port in use: one line naming it and what it was for; nothing started."""
    launcher, base, admin_base, _ = _launcher(tmp_path, 2)
    with socket.socket() as holder:
        holder.bind((HOST, admin_base + 1))
        holder.listen()
        launcher.start()
        code = launcher.proc.wait(60)
    errors = [li for li in launcher.output().splitlines() if "ERROR" in li]
    assert code == 1, launcher.tail()
    assert len(errors) == 1, errors
    assert f"port {admin_base + 1} (node 2 admin API) is already in use" in errors[0]
    assert not (tmp_path / "data" / "etcd.log").exists()


def test_cluster_up_tells_a_brokers_start_up_error_in_one_line(tmp_path):
    """A broker that refuses its settings: its own error line is on the console (not only
    in its log file), and the cluster stops."""
    launcher, _, _, _ = _launcher(tmp_path, 2, "--override", "num.partitions=many")
    launcher.start()
    code = launcher.proc.wait(120)
    assert code == 1, launcher.tail()
    [line] = [li for li in launcher.output().splitlines() if "cannot start the cluster" in li]
    assert "exited with code 2" in line and "num.partitions" in line, line
    assert "Traceback" not in launcher.output()


def _broker_pids(launcher_pid: int) -> dict[int, int]:
    """node id -> pid of each `python -m logserver --node.id N` child of the launcher."""
    found: dict[int, int] = {}
    for status in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(status.read_text().rsplit(")", 1)[1].split()[1])
            if ppid != launcher_pid:
                continue
            argv = (status.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if b"--node.id" in argv:
            found[int(argv[argv.index(b"--node.id") + 1])] = int(status.parent.name)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
