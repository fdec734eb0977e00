"""What a handler may want to know about the connection a request came in on.

Set by the dispatcher right before each handler runs; a context variable rather than
another handler argument, because only a few handlers (group membership) care.
"""

from __future__ import annotations

from contextvars import ContextVar

# The client's address as Kafka reports it in DescribeGroups: "/127.0.0.1".
client_host: ContextVar[str] = ContextVar("client_host", default="")

# Who sent the request, as Kafka names principals: "User:<SASL user>", "User:<certificate
# subject DN>" on an SSL listener with a client certificate, else "User:ANONYMOUS".
principal: ContextVar[str] = ContextVar("principal", default="User:ANONYMOUS")
# The name of the listener the request came in on (Metadata advertises that listener).
listener_name: ContextVar[str] = ContextVar("listener_name", default="")


def set_peer(peer: str) -> None:
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    client_host.set(f"/{host}")
