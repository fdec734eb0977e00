"""What the kernel shows of a server process under /proc, for the resource-bound tests."""

from __future__ import annotations

from pathlib import Path


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
