"""Limits that protect the server from its clients, each with a documented outcome.

Connection limits are checked when a connection is accepted; Kafka has no error code for
them (it closes the socket, as we do), so a refused client sees the connection closed at
once and retries after its reconnect backoff. Every refusal is logged (at most once per
second per reason, so a flood cannot flood the log too) and counted.

- ``max.connections``: connections open at once, over all clients.
- ``max.connections.per.ip``: connections open at once from one address.
- ``max.connection.creation.rate``: new connections per second, a token bucket whose
  burst is one second's worth.
- ``connections.max.idle.ms``: a connection with no request, no response in flight and
  no bytes moved for this long is closed (Kafka's idle reaper).
- ``max.topics`` / ``max.partitions``: CreateTopics and auto-creation beyond them get
  POLICY_VIOLATION (44) with a message naming the setting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

log = logging.getLogger(__name__)


class _Connection(Protocol):
    last_active: float

    @property
    def in_flight(self) -> int: ...

    def close(self) -> None: ...


class ConnectionLimiter:
    """Admission control for new connections (event-loop thread only)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.max_connections: int = config["max.connections"]
        self.max_per_ip: int = config["max.connections.per.ip"]
        self.rate: float = float(config["max.connection.creation.rate"])
        self._tokens = self.rate
        self._refilled = time.monotonic()
        self._open = 0
        self._per_ip: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        self._last_logged: dict[str, float] = {}

    @property
    def open_connections(self) -> int:
        return self._open

    def admit(self, ip: str) -> bool:
        """Count the connection in and return True, or log why not and return False."""
        if self._open >= self.max_connections:
            return self._refuse("max.connections", ip, f"{self._open} connections open")
        if self._per_ip[ip] >= self.max_per_ip:
            return self._refuse("max.connections.per.ip", ip,
                                f"{self._per_ip[ip]} connections open from {ip}")
        now = time.monotonic()
        self._tokens = min(self.rate, self._tokens + (now - self._refilled) * self.rate)
        self._refilled = now
        if self._tokens < 1:
            return self._refuse("max.connection.creation.rate", ip,
                                f"more than {self.rate:g} new connections per second")
        self._tokens -= 1
        self._open += 1
        self._per_ip[ip] += 1
        return True

    def release(self, ip: str) -> None:
        self._open -= 1
        self._per_ip[ip] -= 1
        if self._per_ip[ip] <= 0:
            del self._per_ip[ip]

    def _refuse(self, setting: str, ip: str, detail: str) -> bool:
        self.refused[setting] += 1
        now = time.monotonic()
        if now - self._last_logged.get(setting, 0.0) >= 1.0:
            self._last_logged[setting] = now
            log.warning("refusing connection from %s: %s reached (%s); %d refused so far",
                        ip, setting, detail, self.refused[setting])
        return False


async def reap_idle_connections(connections: Iterable[_Connection], idle_ms: int) -> None:
    """Close connections idle longer than ``connections.max.idle.ms``; runs until cancelled."""
    idle_s = idle_ms / 1000
    period = min(max(idle_s / 4, 0.05), 30.0)
    while True:
        await asyncio.sleep(period)
        horizon = time.monotonic() - idle_s
        for connection in list(connections):
            if connection.in_flight == 0 and connection.last_active < horizon:
                log.info("closing connection from %s: idle for more than %d ms (connections.max.idle.ms)",
                         getattr(connection, "peer", "?"), idle_ms)
                with contextlib.suppress(Exception):
                    connection.close()


class PolicyViolationError(Exception):
    """A creation would break max.topics / max.partitions: POLICY_VIOLATION."""


def topic_limit_error(config: Mapping[str, Any], topics: int, partitions: int,
                      new_partitions: int) -> str | None:
    """Why creating a topic with ``new_partitions`` would break max.topics / max.partitions."""
    if topics + 1 > config["max.topics"]:
        return f"the broker holds {topics} topics; max.topics is {config['max.topics']}"
    if partitions + new_partitions > config["max.partitions"]:
        source = getattr(config, "sources", {}).get("max.partitions", "")
        why = f" ({source})" if source.startswith("derived") else ""
        return (f"the broker holds {partitions} partitions; {new_partitions} more would exceed "
                f"max.partitions {config['max.partitions']}{why}")
    return None
