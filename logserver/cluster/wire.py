"""One request and its response over an asyncio stream, with the project's sans-I/O
client core (kafkaproto.client): how brokers talk to each other (replica fetches,
transaction markers)."""

from __future__ import annotations

import asyncio

from kafkaproto.client import ClientConnection
from kafkaproto.codegen import Message


async def call(conn: ClientConnection, reader: asyncio.StreamReader,
               writer: asyncio.StreamWriter, api_key: int, version: int,
               body: Message) -> Message | None:
    """Send one request and return its response body (one request at a time)."""
    _, frame = conn.request(api_key, version, body)
    writer.write(frame)
    await writer.drain()
    while True:
        size = int.from_bytes(await reader.readexactly(4), "big", signed=True)
        data = await reader.readexactly(size)
        responses = conn.receive_data(size.to_bytes(4, "big") + data)
        if responses:
            return responses[0].body
