"""The data directory's identity (cluster id, node id), in Kafka's meta.properties format.

A single server makes up its cluster id the first time it opens a data directory. In
cluster mode the id is the cluster's, created once in etcd (logserver.cluster.identity),
and a data directory is only written with that one.
"""

from __future__ import annotations

import base64
import os
import uuid
from pathlib import Path

FILE_NAME = "meta.properties"


class InconsistentClusterIdError(RuntimeError):
    """meta.properties holds another cluster's id: this data directory belongs to another
    cluster (Kafka's InconsistentClusterIdException); start-up is refused."""


class NodeIdMismatchError(RuntimeError):
    """meta.properties was written by another node.id: the data directory is another
    broker's (Kafka refuses the start alike); start-up is refused with one line."""

    def __init__(self, path: Path, stored: int, configured: int) -> None:
        super().__init__(
            f"Configured node.id {configured} doesn't match stored node.id {stored} in "
            f"{path}. If you moved your data, make sure your configured node.id matches; "
            f"to make a new node, start it with an empty data directory")
        self.stored = stored
        self.configured = configured


def read_properties(path: Path) -> dict[str, str]:
    """``key=value`` lines of a meta.properties (comments skipped, values stripped)."""
    return {key.strip(): value.strip() for key, value in (
        line.split("=", 1) for line in path.read_text().splitlines()
        if "=" in line and not line.startswith("#"))}


def stored_node_id(data_dir: Path) -> int | None:
    """The node.id in ``data_dir``'s meta.properties; None without one (or without the
    key); ValueError if it is not a number."""
    path = data_dir / FILE_NAME
    if not path.exists():
        return None
    value = read_properties(path).get("node.id")
    return None if value is None else int(value)


def new_cluster_id() -> str:
    """A random id as Kafka makes them (Uuid.randomUuid().toString(): 22 base64url chars)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def read_cluster_id(data_dir: Path, node_id: int) -> str | None:
    """The cluster id stored in ``data_dir``, None when there is no meta.properties yet."""
    path = data_dir / FILE_NAME
    if not path.exists():
        return None
    values = read_properties(path)
    stored_node = int(values.get("node.id", node_id))
    if stored_node != node_id:
        raise NodeIdMismatchError(path, stored_node, node_id)
    return values["cluster.id"]


def write_cluster_id(data_dir: Path, cluster_id: str, node_id: int) -> None:
    """meta.properties for ``cluster_id``, replaced atomically (never half written)."""
    path = data_dir / FILE_NAME
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n")
    os.replace(tmp, path)


def load_or_create_cluster_id(data_dir: Path, node_id: int) -> str:
    """A single server's cluster id: the stored one, else a new one written down."""
    stored = read_cluster_id(data_dir, node_id)
    if stored is not None:
        return stored
    cluster_id = new_cluster_id()
    write_cluster_id(data_dir, cluster_id, node_id)
    return cluster_id
