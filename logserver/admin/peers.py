"""The admin API's Kafka client for cluster-wide views: it asks the brokers themselves
(ListGroups, OffsetFetch, DescribeGroups, ListOffsets, Fetch, DescribeConfigs), as
Kafka UI does with an AdminClient, so a group coordinated by another broker and a
partition led elsewhere are seen from any broker's admin API.

The requests go to each broker's inter-broker listener (where replica fetchers connect)
over this broker's connections to its peers (cluster/peer_links.py); a broker that does
not answer within ``TIMEOUT_S`` is reported as unreachable, never waited on longer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kafkaproto.codegen import Message
from logserver.cluster.peer_links import Address, PeerUnreachable, Request

if TYPE_CHECKING:
    from logserver.cluster_access import WithCluster

__all__ = ["Address", "PeerUnreachable", "Request", "ask", "live_addresses"]

TIMEOUT_S = 3.0
CLIENT_ID = "admin-console"


async def ask(broker: WithCluster, address: Address, requests: Sequence[Request],
              timeout: float = TIMEOUT_S) -> list[Message]:
    """Send ``requests`` one after the other on one connection; their responses."""
    return await broker.peers.links(CLIENT_ID).ask(address, requests, timeout)


def live_addresses(broker: WithCluster) -> dict[int, Address]:
    """Node id -> inter-broker address of every live broker (this one included)."""
    cluster = broker.cluster
    if cluster is None:
        return {broker.node_id: broker.advertised_address}
    out = {n: (b.host, b.port) for n, b in cluster.model.brokers.items()}
    own = cluster.own_info()
    out[broker.node_id] = (own.host, own.port)
    return out
