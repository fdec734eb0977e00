"""Cluster mode: one Kafka request from this broker's REST Proxy to another broker, over
that broker's inter-broker listener with the project's sans-I/O client (the REST Proxy is
a client of the whole cluster, as Confluent's is).

One connection per request: the proxy's calls to other brokers are few (a produce's
forwarded partitions, a consumer instance's group calls and reads), and a fresh
connection never carries another call's state. The far broker authorises the request
as whoever its inter-broker listener makes of this connection.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from kafkaproto.client import ClientConnection
from kafkaproto.codegen import Message
from logserver.cluster.wire import call

if TYPE_CHECKING:
    from logserver.broker import Broker

log = logging.getLogger(__name__)


class NodeUnreachable(Exception):
    """The broker could not be asked (unknown, down, timed out, undecodable answer)."""


async def send(broker: Broker, node: int, api_key: int, version: int, body: Message,
               timeout_s: float, client_id: str | None = None) -> Message:
    """The response of broker ``node`` to one request; NodeUnreachable if there is none."""
    cluster = broker.cluster
    info = cluster.model.brokers.get(node) if cluster is not None else None
    if info is None:
        raise NodeUnreachable(f"node {node} is not a live broker")
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(info.host, info.port), timeout_s)
    except (OSError, TimeoutError) as exc:
        log.warning("REST proxy to node %d (%s:%d): %s", node, info.host, info.port, exc)
        raise NodeUnreachable(f"node {node}: {exc}") from exc
    try:
        conn = ClientConnection(client_id or f"rest-proxy-{broker.node_id}")
        answer = await asyncio.wait_for(call(conn, reader, writer, api_key, version, body),
                                        timeout_s)
    except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
        log.warning("REST proxy to node %d: api %d: %s", node, api_key, exc)
        raise NodeUnreachable(f"node {node}: {exc}") from exc
    finally:
        writer.close()
    if answer is None:
        raise NodeUnreachable(f"node {node}: no response to api {api_key}")
    return answer


def remote_leader(broker: Broker, topic: str, partition: int) -> int | None:
    """The live broker that leads the partition when it is not this one (cluster mode)."""
    cluster = broker.cluster
    if cluster is None:
        return None
    state = cluster.model.partition(topic, partition)
    if state is None or state.leader == broker.node_id \
            or state.leader not in cluster.model.brokers:
        return None
    return int(state.leader)
