"""A blocking Kafka client for tests: a socket around the sans-I/O core ``kafkaproto.client``.

The core matches every response to the oldest request still waiting, so a response to a
request that should have had none (acks=0), or one out of order, fails the test.
"""

from __future__ import annotations

import socket
from collections import deque
from typing import Any

from helpers.serverproc import HOST
from kafkaproto.client import ClientConnection, Response


class BlockingClient:
    """One connection; ``send``/``recv`` apart so that requests can overlap."""

    def __init__(self, port: int, client_id: str = "tests", timeout: float = 30.0,
                 host: str = HOST) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.core = ClientConnection(client_id)
        self._responses: deque[Response] = deque()

    def send(self, api_key: int, version: int, body: Any, *, expect_response: bool = True) -> int:
        """Sends a request; returns its correlation id (no answer for acks=0: say so)."""
        correlation_id, frame = self.core.request(api_key, version, body,
                                                  expect_response=expect_response)
        self.sock.sendall(frame)
        return correlation_id

    def recv(self) -> Any:
        """The body of the next response (to the oldest request still waiting)."""
        while not self._responses:
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("server closed the connection")
            self._responses.extend(self.core.receive_data(data))
        response = self._responses.popleft()
        if response.error is not None:
            raise response.error
        return response.body

    def call(self, api_key: int, version: int, body: Any) -> Any:
        self.send(api_key, version, body)
        return self.recv()

    def close(self) -> None:
        self.sock.close()
