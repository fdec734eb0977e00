"""One cluster identity: the cluster id is created once in etcd and every broker takes
it from there (meta.properties and Metadata); a data directory of another cluster is
refused at start-up; a broker answers clients only once it has joined (real etcd, real
broker processes, confluent-kafka)."""

from __future__ import annotations

import asyncio
import base64
import uuid

import aetcd
import pytest
from confluent_kafka.admin import AdminClient
from helpers.clusterprocs import Cluster, own_metadata, stored_cluster_id
from helpers.serverproc import ServerProcess, can_connect
from helpers.waiting import wait_until

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
        other = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        meta.write_text(meta.read_text().replace(f"cluster.id={cluster_id}", f"cluster.id={other}"))
        broker.start(wait=False)
        assert broker.proc is not None
        assert broker.proc.wait(timeout=60) == 1  # EXIT_CANNOT_START
        output = _this_start(broker)
        lines = [line for line in output.splitlines() if "refusing to start" in line]
        assert len(lines) == 1, output
        assert cluster_id in lines[0] and other in lines[0] and str(meta) in lines[0], lines
        assert "Traceback" not in output, output
        assert stored_cluster_id(broker.data_dir) == other  # left as it was
        assert _etcd_get(cluster, "brokers/2") is None  # it never registered
    finally:
        cluster.stop()


def test_a_broker_refuses_connections_until_it_has_joined(tmp_path, etcd):
    """While its node id is still registered by a previous session (held here by the
    test, as a killed broker's would be until it expires), a starting broker cannot
    join: its port refuses connections. Once the session is gone it joins, and its
    first answers name the one cluster id and every broker."""
    cluster = Cluster(tmp_path, etcd, 2, **{"broker.session.timeout.ms": 10000})
    try:
        cluster.start()
        broker = cluster.brokers[2]
        cluster_id = own_metadata(cluster.brokers[1].port)[0]
        previous = _etcd_get(cluster, "brokers/2")
        assert previous is not None
        assert broker.stop() == 0  # leaves the cluster: its registration is deleted
        lease = _etcd_hold(cluster, "brokers/2", previous[0])
        broker.start(wait=False)
        wait_until(lambda: "waiting up to" in _this_start(broker), 60,
                   f"the broker to wait for the previous session\n{broker.output_tail()}")
        assert broker.running
        assert not can_connect(broker.port), "it listens before it has joined"
        _etcd_revoke(cluster, lease)
        wait_until(lambda: can_connect(broker.port), 60, "the broker to join and listen")
        registration = _etcd_get(cluster, "brokers/2")
        assert registration is not None and registration[1] not in (0, lease)
        assert own_metadata(broker.port)[0] == cluster_id
        wait_until(lambda: own_metadata(broker.port) == (cluster_id, [1, 2]), 30,
                   "the broker to list every broker")
    finally:
        cluster.stop()


def _this_start(broker: ServerProcess) -> str:
    """The broker's output since its last start."""
    return broker.output().split(f"===== start #{broker.starts}:")[-1]


def _etcd_hold(cluster: Cluster, key: str, value: bytes) -> int:
    """``key`` under the cluster's prefix, put under a lease of the test's own (60 s)."""
    prefix = cluster.brokers[1].settings["cluster.etcd.prefix"]

    async def hold() -> int:
        client = aetcd.Client(host=cluster.etcd.host, port=cluster.etcd.port, timeout=10)
        try:
            lease = await client.lease(60)
            await client.put(f"{prefix}/{key}".encode(), value, lease=lease)
            return int(lease.id)
        finally:
            await client.close()

    return asyncio.run(hold())


def _etcd_revoke(cluster: Cluster, lease: int) -> None:
    async def revoke() -> None:
        client = aetcd.Client(host=cluster.etcd.host, port=cluster.etcd.port, timeout=10)
        try:
            await client.revoke_lease(lease)
        finally:
            await client.close()

    asyncio.run(revoke())
