"""The admin API's Kafka client for cluster-wide views: it asks the brokers themselves
(ListGroups, OffsetFetch, DescribeGroups, ListOffsets, Fetch, DescribeConfigs), as
Kafka UI does with an AdminClient, so a group coordinated by another broker and a
partition led elsewhere are seen from any broker's admin API.

One short connection per broker and view, on the broker's inter-broker listener (where
replica fetchers connect), with the project's sans-I/O client core; a broker that does
not answer within ``TIMEOUT_S`` is reported as unreachable, never waited on longer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kafkaproto.client import ClientConnection
from kafkaproto.codegen import Message
from logserver.cluster.wire import call

if TYPE_CHECKING:
    from logserver.broker import Broker

log = logging.getLogger(__name__)

TIMEOUT_S = 3.0
CLIENT_ID = "admin-console"

Address = tuple[str, int]
Request = tuple[int, int, Message]  # api key, version, body


class PeerUnreachable(Exception):
    """A broker did not answer (down, restarting, or too slow)."""


async def ask(address: Address, requests: Sequence[Request],
              timeout: float = TIMEOUT_S) -> list[Message]:
    """Send ``requests`` one after the other on one connection; their responses."""
    async def exchange() -> list[Message]:
        reader, writer = await asyncio.open_connection(*address)
        conn = ClientConnection(CLIENT_ID)
        try:
            answers = []
            for api_key, version, body in requests:
                answer = await call(conn, reader, writer, api_key, version, body)
                if answer is None:
                    raise PeerUnreachable(f"{address[0]}:{address[1]} sent no response")
                answers.append(answer)
            return answers
        finally:
            writer.close()
            with contextlib.suppress(OSError, asyncio.IncompleteReadError):
                await writer.wait_closed()
    try:
        return await asyncio.wait_for(exchange(), timeout)
    except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
        log.info("admin view: broker at %s:%d did not answer: %s", *address, exc)
        raise PeerUnreachable(f"{address[0]}:{address[1]}: {exc or type(exc).__name__}") from exc


def live_addresses(broker: Broker) -> dict[int, Address]:
    """Node id -> inter-broker address of every live broker (this one included)."""
    cluster = broker.cluster
    if cluster is None:
        return {broker.node_id: broker.advertised_address}
    out = {n: (b.host, b.port) for n, b in cluster.model.brokers.items()}
    own = cluster.own_info()
    out[broker.node_id] = (own.host, own.port)
    return out
