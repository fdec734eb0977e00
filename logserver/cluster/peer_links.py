"""Connections from this broker to the other brokers' inter-broker listeners, for the
requests it sends them itself: the admin API's cluster-wide views (admin/peers.py), the
REST Proxy's calls (rest/to_node.py) and the transaction coordinator's markers
(cluster/txn_markers.py). One module, so they connect, time out, back off and close the
same way.

Each user has its own client id (its requests show under it in the far broker's logs and
request metrics; a request may name another, as a REST consumer instance does). Connections to a peer are kept and reused: a request takes an idle one,
or opens one when none is idle, so a long poll or a JoinGroup on one connection never
holds up a marker on another (a connection carries one request at a time, as the far
broker answers them in order anyway). A connection that fails or times out is closed,
never reused. After failures in a row, the next connect to that broker waits out the
project's one :class:`Backoff` (Kafka's ``reconnect.backoff.ms`` doubling up to
``reconnect.backoff.max.ms``, with jitter): a request within it fails at once, as Kafka's
NetworkClient does with a node it is backing off from. Everything is closed when the
broker shuts down; a request after that fails. The connections are the project's
asyncio Kafka client (commonlib.kafkaclient.AsyncConnection).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from commonlib.kafkaclient import AsyncConnection, Backoff
from kafkaproto.codegen import Message
from kafkaproto.errors import ProtocolError

log = logging.getLogger(__name__)

Address = tuple[str, int]
Request = tuple[int, int, Message]  # api key, version, body

#: Kafka's reconnect.backoff.ms (50) and reconnect.backoff.max.ms (1000).
RECONNECT = Backoff(50, 1000)
#: An idle connection older than this is closed rather than reused (below any sensible
#: connections.max.idle.ms of the far broker, which closes idle connections itself).
IDLE_S = 30.0
IDLE_PER_PEER = 4  # connections kept idle per peer; more are closed when done


class PeerUnreachable(Exception):
    """A broker could not be asked (down, restarting, too slow, or shutting down)."""


@dataclass(eq=False)  # kept in a set by identity
class _Connection:
    conn: AsyncConnection
    idle_since: float = 0.0

    def usable(self, now: float, idle_s: float) -> bool:
        return not (self.conn.closed or now - self.idle_since > idle_s)

    def close(self) -> None:
        self.conn.close("done with it")


@dataclass
class _Peer:
    idle: list[_Connection] = field(default_factory=list)
    failures: int = 0  # connects or requests failed in a row
    retry_at: float = 0.0  # no connect before this (monotonic)


class PeerLinks:
    """The connections of one user (one client id) to every peer it asks."""

    def __init__(self, client_id: str, policy: Backoff = RECONNECT,
                 idle_s: float = IDLE_S) -> None:
        self.client_id = client_id
        self.policy = policy
        self.idle_s = idle_s
        self._peers: dict[Address, _Peer] = {}
        self._busy: set[_Connection] = set()
        self.closed = False

    async def ask(self, address: Address, requests: Sequence[Request],
                  timeout_s: float | None, client_id: str | None = None) -> list[Message]:
        """The responses to ``requests``, sent one after the other on one connection, all
        within ``timeout_s`` (None: no limit); PeerUnreachable if there are none."""
        where = f"{address[0]}:{address[1]}"
        if self.closed:
            raise PeerUnreachable(f"{where}: this broker is shutting down")
        peer = self._peers.setdefault(address, _Peer())
        try:
            async with asyncio.timeout(timeout_s):
                connection = await self._take(address, peer)
                connection.conn.client_id = client_id or self.client_id
                try:
                    answers = [await self._call(connection, request)
                               for request in requests]
                except BaseException:
                    self._busy.discard(connection)
                    connection.close()
                    raise
        except (OSError, TimeoutError, ProtocolError) as exc:  # KafkaConnectionError too
            peer.failures += 1
            peer.retry_at = time.monotonic() + self.policy.delay_s(peer.failures)
            log.info("%s: broker at %s did not answer: %s", self.client_id, where,
                     exc or type(exc).__name__)
            raise PeerUnreachable(f"{where}: {exc or type(exc).__name__}") from exc
        peer.failures = 0
        self._give_back(peer, connection)
        return answers

    async def _take(self, address: Address, peer: _Peer) -> _Connection:
        now = time.monotonic()
        while peer.idle:
            connection = peer.idle.pop()
            if connection.usable(now, self.idle_s):
                self._busy.add(connection)
                return connection
            connection.close()
        if now < peer.retry_at:
            raise PeerUnreachable(f"{address[0]}:{address[1]}: not answering, "
                                  f"next try in {peer.retry_at - now:.2f} s")
        conn = await AsyncConnection.open(address[0], address[1], client_id=self.client_id,
                                          request_timeout=None, connect_timeout=None,
                                          negotiate=False)  # the callers choose versions
        connection = _Connection(conn)
        self._busy.add(connection)
        return connection

    async def _call(self, connection: _Connection, request: Request) -> Message:
        api_key, version, body = request
        answer: Message = await connection.conn.request(api_key, version, body)
        return answer

    def _give_back(self, peer: _Peer, connection: _Connection) -> None:
        self._busy.discard(connection)
        if self.closed or len(peer.idle) >= IDLE_PER_PEER:
            connection.close()
            return
        connection.idle_since = time.monotonic()
        peer.idle.append(connection)

    async def close(self) -> None:
        """Close every connection (those in use end their request with an error)."""
        self.closed = True
        connections = [c for p in self._peers.values() for c in p.idle] + list(self._busy)
        self._peers.clear()
        self._busy.clear()
        for connection in connections:
            connection.close()
        for connection in connections:
            with contextlib.suppress(OSError):
                await connection.conn.wait_closed()


class PeerConnections:
    """A broker's PeerLinks, one per client id, closed with the broker."""

    def __init__(self) -> None:
        self._links: dict[str, PeerLinks] = {}
        self.closed = False

    def links(self, client_id: str) -> PeerLinks:
        found = self._links.get(client_id)
        if found is None:
            found = self._links[client_id] = PeerLinks(client_id)
            found.closed = self.closed
        return found

    async def close(self) -> None:
        self.closed = True
        for links in list(self._links.values()):
            await links.close()
