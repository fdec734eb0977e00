"""``BrokerServices`` plus the cluster node, for the few modules that still read the node
directly rather than through ``routing`` or ``control``: the admin API's cluster views,
the REST Proxy's forwarding to other brokers, and the inter-broker listener check.

A separate Protocol because the cluster node itself depends on ``BrokerServices``: were
the node part of that, the two would import each other (tests/unit/test_import_cycles.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from logserver.services import BrokerServices

if TYPE_CHECKING:
    from logserver.cluster.node import ClusterNode

__all__ = ["WithCluster"]


class WithCluster(BrokerServices, Protocol):
    cluster: ClusterNode | None  # cluster mode only (logserver/cluster)
