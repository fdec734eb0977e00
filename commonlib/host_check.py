"""Refuse admin requests addressed to a name that is not this server's (DNS rebinding).

A web page on another site can make a browser send requests to 127.0.0.1 by pointing
one of its own DNS names at that address; the browser then treats our answers as that
site's and lets the page read them. Such a request still carries the attacker's name in
its ``Host`` header, so the admin listener answers only requests whose Host is an IP
address, ``localhost``, this machine's own names or a name listed in
``admin.allowed.hosts`` (``*``: any).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def host_name(host_header: str) -> str:
    """The name part of a Host header: without its port, brackets or a trailing dot."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    if host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class HostCheck:
    """The names a Host header may carry; everything else gets 403."""

    def __init__(self, allowed: Iterable[str], listener_hosts: Iterable[str]) -> None:
        names = {n.strip().lower().rstrip(".") for n in allowed if n.strip()}
        self.any = "*" in names
        names |= {"localhost", socket.gethostname().lower(), socket.getfqdn().lower()}
        names |= {h.lower() for h in listener_hosts if h}
        self.names = frozenset(names)

    def permits(self, host_header: str | None) -> bool:
        if self.any or not host_header:  # HTTP/1.0 without Host: no browser sends that
            return True
        name = host_name(host_header)
        return _is_ip(name) or name in self.names

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        host = request.headers.get("Host")
        if not self.permits(host):
            return web.json_response(
                {"error": f"Host {host!r} is not a name of this server (admin.allowed.hosts)"},
                status=403)
        return await handler(request)
