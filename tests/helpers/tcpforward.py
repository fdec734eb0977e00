"""A TCP forwarder on 127.0.0.1, as a child process the test can pause.

``TcpForwarder`` runs this file: every connection to its port is relayed to the target.
Paused with SIGSTOP it still completes TCP handshakes (the kernel does) but relays
nothing: what goes through it sees a peer that stopped answering, the way a broker
cut off from etcd by the network does, while everything else reaches etcd directly.

Run: ``python tcpforward.py LISTEN_PORT TARGET_HOST TARGET_PORT``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

from commonlib.childproc import HOST, ListeningChild


class TcpForwarder(ListeningChild):
    """This file as a child process relaying ``127.0.0.1:port`` to ``target``."""

    name = "tcpforward"

    def __init__(self, log_path: Path, target: str) -> None:
        super().__init__(log_path)
        self.target = target
        self.paused = False

    def command(self) -> list[str]:
        host, _, port = self.target.rpartition(":")
        return [sys.executable, str(Path(__file__).resolve()), str(self.port), host, port]

    def pause(self) -> None:
        """SIGSTOP by pid: connections stay open, nothing is relayed."""
        assert self.pid is not None
        os.kill(self.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        if self.pid is not None and self.paused:
            os.kill(self.pid, signal.SIGCONT)
        self.paused = False

    def stop(self, timeout: float = 10.0) -> int | None:
        self.resume()  # a stopped process would not see the stop signal
        return super().stop(timeout)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            writer.close()


async def _serve(port: int, target_host: str, target_port: int) -> None:
    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(target_host, target_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = await asyncio.start_server(relay, HOST, port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(_serve(int(sys.argv[1]), sys.argv[2], int(sys.argv[3])))
