"""Cluster mode: one Kafka request from this broker's REST Proxy to another broker, over
that broker's inter-broker listener with the project's sans-I/O client (the REST Proxy is
a client of the whole cluster, as Confluent's is).

The connections are this broker's to its peers (cluster/peer_links.py), under the REST
Proxy's client id: kept and reused, one request at a time each, none carrying another
call's state. The far broker authorises the request as whoever its inter-broker listener
makes of this connection, except a forwarded produce, which is authorised as the REST
caller (rest/forward.py).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kafkaproto.codegen import Message
from logserver.cluster.peer_links import PeerUnreachable

if TYPE_CHECKING:
    from logserver.cluster_access import WithCluster

log = logging.getLogger(__name__)

#: The broker could not be asked (unknown, down, timed out, undecodable answer).
NodeUnreachable = PeerUnreachable


async def send(broker: WithCluster, node: int, api_key: int, version: int, body: Message,
               timeout_s: float, client_id: str | None = None) -> Message:
    """The response of broker ``node`` to one request; NodeUnreachable if there is none."""
    cluster = broker.cluster
    info = cluster.model.brokers.get(node) if cluster is not None else None
    if info is None:
        raise NodeUnreachable(f"node {node} is not a live broker")
    links = broker.peers.links(client_id_of(broker))
    try:
        [answer] = await links.ask((info.host, info.port), [(api_key, version, body)],
                                   timeout_s, client_id)
    except PeerUnreachable as exc:
        log.warning("REST proxy to node %d: api %d: %s", node, api_key, exc)
        raise
    return answer


def client_id_of(broker: WithCluster) -> str:
    """The REST Proxy's client id on other brokers."""
    return f"rest-proxy-{broker.node_id}"


def remote_leader(broker: WithCluster, topic: str, partition: int) -> int | None:
    """The live broker that leads the partition when it is not this one (cluster mode)."""
    cluster = broker.cluster
    if cluster is None:
        return None
    state = cluster.model.partition(topic, partition)
    if state is None or state.leader == broker.node_id \
            or state.leader not in cluster.model.brokers:
        return None
    return int(state.leader)
