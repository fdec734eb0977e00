"""Free loopback ports for the servers that tests, demos and benchmarks start.

A port picked by binding port 0 comes from the kernel's ephemeral range, and while a
server is down for a restart that port can be handed to some client's outgoing
connection; so pick below that range, where the kernel never assigns source ports.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

HOST = "127.0.0.1"


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    low, _high = _ephemeral_range()
    rng = random.SystemRandom()
    if low > 15000:
        for _ in range(50):
            port = rng.randrange(10000, low)
            if _bindable(port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]
