"""The data directory's identity (cluster id, node id), in Kafka's meta.properties format."""

from __future__ import annotations

import base64
import os
import uuid
from pathlib import Path

FILE_NAME = "meta.properties"


def load_or_create_cluster_id(data_dir: Path, node_id: int) -> str:
    path = data_dir / FILE_NAME
    if path.exists():
        values = dict(
            line.split("=", 1) for line in path.read_text().splitlines()
            if "=" in line and not line.startswith("#"))
        stored_node = int(values.get("node.id", node_id))
        if stored_node != node_id:
            raise RuntimeError(
                f"{path} belongs to node.id {stored_node}, but node.id is {node_id}")
        return values["cluster.id"]
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n")
    os.replace(tmp, path)
    return cluster_id
