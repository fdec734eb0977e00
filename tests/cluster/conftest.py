"""Fixtures shared by several cluster test modules (``etcd`` and ``cluster`` are in
tests/conftest.py).

- ``secured``: three brokers with a SASL_PLAINTEXT listener beside the PLAINTEXT one and
  Kafka's StandardAuthorizer (tests/helpers/sasl_cluster.py), User:ANONYMOUS a super user;
  ``secured.sasl_ports`` maps each node to its SASL port.
"""

from __future__ import annotations

import pytest
from helpers.clusterprocs import Cluster
from helpers.sasl_cluster import add_sasl_listeners


@pytest.fixture
def secured(tmp_path, etcd):
    nodes = Cluster(tmp_path, etcd, 3, **{"default.replication.factor": 3})
    sasl_ports = add_sasl_listeners(nodes, "User:ANONYMOUS")
    nodes.sasl_ports = sasl_ports  # type: ignore[attr-defined]
    try:
        yield nodes.start()
    finally:
        nodes.stop()
