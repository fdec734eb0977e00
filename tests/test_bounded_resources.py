"""Issue 11, bounded resources: what a hostile client can make the server hold is bounded
by settings, not by what the client announces or how many things it names. Each test
runs a real server on 127.0.0.1, attacks it over raw sockets (``rawwire``) and measures
the server's memory (VmRSS) and descriptors from ``/proc/<pid>``: counts and bytes.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from pathlib import Path

import pytest
import rawwire as rw

pytestmark = [pytest.mark.timeout(180)]


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def server_side_queues(pid: int, port: int) -> list[tuple[int, int]]:
    """(unread, unsent) bytes of each established connection the server accepted on
    ``port``, from the kernel's table (/proc/<pid>/net/tcp: rx_queue, tx_queue)."""
    queues = []
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port = int(fields[1].split(":")[1], 16)
        if local_port == port and fields[3] == "01":
            tx, rx = (int(x, 16) for x in fields[4].split(":"))
            queues.append((rx, tx))
    return queues


def wait_for(condition, timeout: float = 20.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


# ------------------------------------------------------------ 1. frame buffers
def test_announced_frame_sizes_cost_nothing_until_their_bytes_arrive(server_factory):
    """20 sockets each announce a 100 MB frame (under socket.request.max.bytes) and send
    6 bytes of it: the server's memory grows by a few MB, not by 2 GB."""
    server = server_factory()
    rw.api_versions_ok(server.port)
    before = rss_kb(server.pid)
    socks = []
    try:
        for _ in range(20):
            sock = socket.create_connection((rw.HOST, server.port))
            sock.sendall(struct.pack(">i", 100_000_000) + b"\x00\x12\x00\x00\x00\x01")
            socks.append(sock)
        wait_for(lambda: len(server_side_queues(server.pid, server.port)) == 20
                 and all(rx == 0 for rx, _ in server_side_queues(server.pid, server.port)),
                 what="the server to read the 20 prefixes")
        rw.api_versions_ok(server.port)  # and the loop went round since
        grown_mb = (rss_kb(server.pid) - before) / 1024
        assert grown_mb < 8, f"20 announced 100 MB frames raised RSS by {grown_mb:.1f} MB"
        for sock in socks:  # still open, waiting for the rest of their frame
            sock.settimeout(0.01)
            with pytest.raises(TimeoutError):
                sock.recv(1)
    finally:
        for sock in socks:
            sock.close()


def test_frame_above_socket_request_max_bytes_is_closed_unread(server_factory):
    """As Kafka: a size prefix above socket.request.max.bytes (default 104857600) closes
    the connection; the server holds nothing for it."""
    server = server_factory()
    with rw.Conn(server.port) as c:
        c.send(struct.pack(">i", 104857600 + 1) + b"\x00" * 6)
        assert c.closed_by_server(timeout=10)
    rw.api_versions_ok(server.port)
    assert "socket.request.max.bytes" in server.output()
