"""A single-node server needs no etcd client: ``pip install .`` (the README's run
command) does not install the ``cluster`` extra (aetcd), and the server, its admin
config APIs and the bridge must run without it (a fresh-clone run once failed with
ModuleNotFoundError: aetcd)."""

from __future__ import annotations

import subprocess
import sys

from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kafka import KafkaConsumer, KafkaProducer

from commonlib.childproc import python_path_env

# Python stops at sys.modules[...] = None: `import aetcd` raises ImportError, as where
# the package is not installed.
WITHOUT_AETCD = ("-c", "import sys; sys.modules['aetcd'] = None; "
                 "from logserver.cli import main; sys.exit(main())")


def test_single_node_serves_without_aetcd(server_factory) -> None:
    server = server_factory(launcher=WITHOUT_AETCD)
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic("plain", 1, 1)])["plain"].result(30)
    topic = ConfigResource("TOPIC", "plain", set_config={"retention.ms": "3600000"})
    assert admin.alter_configs([topic])[topic].result(30) is None
    described = admin.describe_configs([ConfigResource("TOPIC", "plain")])
    entries = next(iter(described.values())).result(30)
    assert entries["retention.ms"].value == "3600000"
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, acks="all")
    try:
        producer.send("plain", b"one").get(timeout=30)
    finally:
        producer.close()
    consumer = KafkaConsumer("plain", bootstrap_servers=server.bootstrap,
                             auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    try:
        assert [m.value for m in consumer] == [b"one"]
    finally:
        consumer.close()
    assert server.stop() == 0
    assert "Traceback" not in server.output()


def test_cluster_mode_without_aetcd_says_what_to_install(tmp_path) -> None:
    """Cluster mode without the etcd client: one line naming the extra, no traceback."""
    for args in (["--log.dirs", str(tmp_path / "data"), "--cluster.etcd.endpoints", "127.0.0.1:1"],
                 ["cluster", "up", "--dir", str(tmp_path / "cluster")]):
        done = subprocess.run([sys.executable, *WITHOUT_AETCD, *args], capture_output=True,
                              text=True, timeout=60, env=python_path_env())
        assert done.returncode == 2, done.stderr
        assert "bash contrib/venv.sh cluster" in done.stderr
        assert "Traceback" not in done.stderr
