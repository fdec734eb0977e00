"""Which web pages may open MQTT-over-WebSocket connections (cross-site WebSocket hijacking).

A browser lets any page open a WebSocket to any address, including 127.0.0.1 or a device
network, and sends the page's ``Origin`` with it; the WebSocket protocol leaves the check
to the server. A connection is accepted when it has no Origin (not a browser: devices,
gateways, scripts), when the Origin is listed in ``--ws-allowed-origin`` (``*``: any), or
when the page comes from the host the browser connected to (same host, any port) and that
host is one of this machine's names or addresses, so a DNS name pointed at us by another
site (DNS rebinding) does not count as the same host.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from commonlib.host_check import HostCheck, host_name


def _origin(text: str) -> str:
    return text.strip().rstrip("/").lower()


class OriginCheck:
    def __init__(self, allowed_origins: Iterable[str], listener_hosts: Iterable[str]) -> None:
        allowed = {_origin(o) for o in allowed_origins if o.strip()}
        self.any = "*" in allowed
        self.allowed = frozenset(allowed)
        self.hosts = HostCheck([], listener_hosts)

    def permits(self, origin: str | None, host: str | None) -> bool:
        if origin is None or self.any or _origin(origin) in self.allowed:
            return True
        page_host = urlsplit(_origin(origin)).hostname
        if page_host is None or not host:
            return False  # "null" (a file or sandboxed page) or no Host: not same-host
        return page_host == host_name(host) and self.hosts.permits(host)
