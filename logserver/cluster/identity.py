"""The cluster id: created once in etcd, taken from there by every broker.

As Kafka's brokers take the id from ZooKeeper's ``/cluster/id`` (or the KRaft metadata
log) rather than making one up each: whichever broker comes first creates the key
(a transaction that succeeds only if it does not exist yet), every broker then reads
it back and writes it to its meta.properties. A data directory already stamped with
another id belongs to another cluster: the broker refuses to start (Kafka's
InconsistentClusterIdException), rather than mix two clusters' data or show clients
two cluster ids.
"""

from __future__ import annotations

import logging
from pathlib import Path

from logserver.cluster.etcd import EtcdStore
from logserver.cluster_meta import (
    FILE_NAME,
    InconsistentClusterIdError,
    new_cluster_id,
    write_cluster_id,
)

log = logging.getLogger(__name__)


async def join_cluster_id(store: EtcdStore, key: bytes, data_dir: Path, node_id: int,
                          stored: str | None) -> str:
    """The cluster's id, from etcd (created there if this broker is the first).

    ``stored``: the id in this broker's meta.properties, None if it has none yet. A
    first broker offers its stored id, so a data directory that was a single server's
    keeps its id when it starts a cluster; a broker without one gets etcd's written down.
    Raises InconsistentClusterIdError if meta.properties holds another id.
    """
    offered = stored or new_cluster_id()
    if await store.create([(key, offered.encode())]):
        log.info("created cluster id %s in etcd (%s)", offered, key.decode())
    found = await store.get(key)
    if found is None:  # only if someone deletes it between the two calls
        raise RuntimeError(f"the cluster id key {key.decode()} vanished from etcd")
    cluster_id = found[0].decode()
    if stored is not None and stored != cluster_id:
        raise InconsistentClusterIdError(
            f"the cluster id in etcd is {cluster_id} ({key.decode()}), but "
            f"{data_dir / FILE_NAME} holds cluster.id {stored}: this broker is trying to "
            f"join the wrong cluster (check cluster.etcd.endpoints, cluster.etcd.prefix "
            f"and log.dirs)")
    if stored is None:
        data_dir.mkdir(parents=True, exist_ok=True)
        write_cluster_id(data_dir, cluster_id, node_id)
    return cluster_id
