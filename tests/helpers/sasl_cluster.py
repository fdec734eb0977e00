"""A cluster whose brokers have a SASL_PLAINTEXT listener for clients beside the
PLAINTEXT one their followers use (``inter.broker.listener.name``), SCRAM users and
Kafka's StandardAuthorizer: the set-up of every cluster security test."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import aetcd

from helpers.clusterprocs import Cluster
from helpers.kafkasec import STANDARD, add_user
from helpers.serverproc import HOST, ServerProcess, free_port

MECHANISM = "SCRAM-SHA-256"


def add_sasl_listeners(nodes: Cluster, super_users: str, users: Mapping[str, str] = {},
                       **settings: object) -> dict[int, int]:
    """Turn the brokers of a cluster not yet started into SASL ones; returns each
    node's SASL port."""
    sasl_ports: dict[int, int] = {}
    for node, plain in list(nodes.brokers.items()):
        assert plain.data_dir is not None
        for user, password in users.items():
            add_user(plain.data_dir, user, MECHANISM, password)
        port, sasl = free_port(), free_port()
        sasl_ports[node] = sasl
        nodes.brokers[node] = ServerProcess(plain.data_dir, port=port, settings={
            **plain.settings,
            "listeners": f"PLAINTEXT://{HOST}:{port},SASL_PLAINTEXT://{HOST}:{sasl}",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": MECHANISM,
            "authorizer.class.name": STANDARD,
            "super.users": super_users,
            **settings})
    return sasl_ports


def etcd_value(cluster: Cluster, key: str) -> bytes:
    """The value of ``key`` under the cluster's prefix, read with a real etcd client."""
    prefix = cluster.brokers[1].settings["cluster.etcd.prefix"]

    async def get() -> bytes:
        client = aetcd.Client(host=cluster.etcd.host, port=cluster.etcd.port, timeout=10)
        try:
            found = await client.get(f"{prefix}/{key}".encode())
            assert found is not None, f"{prefix}/{key} is not in etcd"
            return bytes(found.value)
        finally:
            await client.close()

    return asyncio.run(get())
