"""One cluster identity: the cluster id is created once in etcd and every broker takes
it from there (meta.properties and Metadata); a data directory of another cluster is
refused at start-up; a broker answers clients only once it has joined (real etcd, real
broker processes, confluent-kafka)."""

from __future__ import annotations

import asyncio

import aetcd
import pytest
from clusterprocs import Cluster, own_metadata, stored_cluster_id, wait_until
from confluent_kafka.admin import AdminClient
from serverproc import can_connect

from logserver.cluster_meta import new_cluster_id

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def _etcd_get(cluster: Cluster, key: str) -> tuple[bytes, int] | None:
    """The value and lease id of ``key`` under the cluster's prefix, None if absent."""
    prefix = cluster.brokers[1].settings["cluster.etcd.prefix"]

    async def get() -> tuple[bytes, int] | None:
        client = aetcd.Client(host=cluster.etcd.host, port=cluster.etcd.port, timeout=10)
        try:
            found = await client.get(f"{prefix}/{key}".encode())
            return None if found is None else (bytes(found.value), int(found.lease))
        finally:
            await client.close()

    return asyncio.run(get())


def test_brokers_started_together_on_fresh_dirs_share_the_etcd_cluster_id(tmp_path, etcd):
    cluster = Cluster(tmp_path, etcd, 3)
    try:
        for broker in cluster.brokers.values():  # all at once: they race for the id
            broker.start(wait=False)
        for broker in cluster.brokers.values():
            broker.wait_ready()
        found = _etcd_get(cluster, "cluster_id")
        assert found is not None
        cluster_id = found[0].decode()
        assert len(cluster_id) == 22  # Kafka's base64 uuid
        for node, broker in cluster.brokers.items():
            assert broker.data_dir is not None
            assert stored_cluster_id(broker.data_dir) == cluster_id, node
            # the broker's own first answer, as soon as it listens, names the one id
            assert own_metadata(broker.port)[0] == cluster_id, node
        for node, broker in cluster.brokers.items():
            wait_until(lambda b=broker: own_metadata(b.port) == (cluster_id, [1, 2, 3]), 30,
                       f"node {node} to list every broker")
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            assert admin.list_topics(timeout=10).cluster_id == cluster_id
            assert admin.describe_cluster().result(15).cluster_id == cluster_id
    finally:
        cluster.stop()


def test_a_data_directory_of_another_cluster_refuses_the_start(tmp_path, etcd):
    cluster = Cluster(tmp_path, etcd, 2)
    try:
        cluster.start()
        broker = cluster.brokers[2]
        assert broker.data_dir is not None and broker.stop() == 0
        meta = broker.data_dir / "meta.properties"
        cluster_id = stored_cluster_id(broker.data_dir)
        other = new_cluster_id()
        meta.write_text(meta.read_text().replace(f"cluster.id={cluster_id}", f"cluster.id={other}"))
        broker.start(wait=False)
        assert broker.proc is not None
        assert broker.proc.wait(timeout=60) == 1  # EXIT_CANNOT_START
        output = broker.output().split(f"===== start #{broker.starts}:")[-1]
        lines = [line for line in output.splitlines() if "refusing to start" in line]
        assert len(lines) == 1, output
        assert cluster_id in lines[0] and other in lines[0] and str(meta) in lines[0], lines
        assert "Traceback" not in output, output
        assert stored_cluster_id(broker.data_dir) == other  # left as it was
        assert _etcd_get(cluster, "brokers/2") is None  # it never registered
    finally:
        cluster.stop()


def test_a_restarted_broker_refuses_connections_until_it_has_joined(tmp_path, cluster):
    broker = cluster.brokers[2]
    before = _etcd_get(cluster, "brokers/2")
    assert before is not None
    cluster_id = own_metadata(cluster.brokers[1].port)[0]
    broker.kill9()
    broker.start(wait=False)  # its old session is still live in etcd: it must wait it out
    refused = 0

    def accepting() -> bool:
        nonlocal refused
        assert broker.running, broker.output_tail()
        if can_connect(broker.port):
            return True
        refused += 1
        return False

    wait_until(accepting, 60, "the restarted broker to accept connections")
    # the first connection it accepts comes after it registered again, on a new session
    registration = _etcd_get(cluster, "brokers/2")
    assert registration is not None and registration[1] != before[1], (before, registration)
    assert refused > 0  # its process was running while the port refused connections
    assert own_metadata(broker.port)[0] == cluster_id
    wait_until(lambda: own_metadata(broker.port) == (cluster_id, [1, 2, 3]), 30,
               "the restarted broker to list every broker")
