"""A minimal asyncio MQTT client on the bridge's codec: the load generator of the tests
and benchmarks (thousands of simulated devices in one process, where a thread-per-client
library would not scale). It speaks to any MQTT server, so the same generator drives
the bridge and mosquitto.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from mqtt_bridge.codec import (
    MQTT_5,
    Ack,
    Connack,
    Connect,
    Disconnect,
    PacketReader,
    PacketType,
    Publish,
    Suback,
    SubOptions,
    Subscribe,
    Unsuback,
    Will,
    encode,
    puback,
)

log = logging.getLogger(__name__)


class MqttClient(asyncio.Protocol):
    """One connection. ``on_message(publish, recv_time)`` sees every incoming PUBLISH."""

    def __init__(
        self,
        client_id: str,
        *,
        version: int = 4,
        on_message: Callable[[Publish, float], None] | None = None,
        auto_ack: bool = True,
    ) -> None:
        self.client_id = client_id
        self.version = version
        self.on_message = on_message
        self.auto_ack = auto_ack
        self.reader = PacketReader(version=version)
        self.transport: asyncio.Transport | None = None
        self.messages: asyncio.Queue[Publish] | None = None if on_message else asyncio.Queue()
        self.connack: asyncio.Future[Connack] | None = None
        self.closed: asyncio.Future[None] | None = None
        self.disconnect_packet: Disconnect | None = None
        self._waiters: dict[tuple[int, int], asyncio.Future[Any]] = {}
        self._pid = 0
        self._out: list[bytes] = []
        self._flush_pending = False

    # ---- asyncio.Protocol ---------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        now = time.monotonic()
        for p in self.reader.feed(data):
            t = p.type
            if t == PacketType.PUBLISH:
                if p.qos and self.auto_ack:
                    kind = PacketType.PUBACK if p.qos == 1 else PacketType.PUBREC
                    self._write(puback(p.packet_id, kind))
                if self.on_message is not None:
                    self.on_message(p, now)
                elif self.messages is not None:
                    self.messages.put_nowait(p)
            elif t == PacketType.CONNACK:
                if self.connack is not None and not self.connack.done():
                    self.connack.set_result(p)
            elif isinstance(p, Ack):
                if t == PacketType.PUBREC:
                    self._write(puback(p.packet_id, PacketType.PUBREL))
                    continue
                key = (PacketType.PUBACK if t == PacketType.PUBCOMP else t, p.packet_id)
                fut = self._waiters.pop(key, None)
                if fut is not None and not fut.done():
                    fut.set_result(p)
            elif isinstance(p, Suback | Unsuback):
                fut = self._waiters.pop((t, p.packet_id), None)
                if fut is not None and not fut.done():
                    fut.set_result(p)
            elif isinstance(p, Disconnect):
                self.disconnect_packet = p

    def connection_lost(self, exc: Exception | None) -> None:
        err = ConnectionError(f"{self.client_id}: connection lost")
        for fut in self._waiters.values():
            if not fut.done():
                fut.set_exception(err)
        self._waiters.clear()
        if self.connack is not None and not self.connack.done():
            self.connack.set_exception(err)
        if self.closed is not None and not self.closed.done():
            self.closed.set_result(None)

    # ---- API ----------------------------------------------------------------------
    async def connect(
        self,
        host: str,
        port: int,
        *,
        clean: bool = True,
        keep_alive: int = 60,
        properties: dict[str, Any] | None = None,
        will: Will | None = None,
        username: str | None = None,
        password: bytes | None = None,
        timeout: float = 10.0,
    ) -> Connack:
        loop = asyncio.get_running_loop()
        self.connack = loop.create_future()
        self.closed = loop.create_future()
        await loop.create_connection(lambda: self, host, port)
        self._write(
            encode(
                Connect(self.client_id, self.version, clean, keep_alive, username, password, will,
                        properties or {}),
                self.version,
            )
        )
        return await asyncio.wait_for(self.connack, timeout)

    def _next_pid(self) -> int:
        self._pid = self._pid % 65535 + 1
        return self._pid

    def _write(self, data: bytes) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        self._out.append(data)
        if not self._flush_pending:
            self._flush_pending = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_pending = False
        out, self._out = self._out, []
        if out and self.transport is not None and not self.transport.is_closing():
            self.transport.write(b"".join(out))

    def publish(
        self, topic: str, payload: bytes, qos: int = 0, retain: bool = False,
        properties: dict[str, Any] | None = None,
    ) -> asyncio.Future[Any] | None:
        """Send a PUBLISH; for QoS 1/2 the future resolves with the PUBACK/PUBCOMP."""
        pid = self._next_pid() if qos else 0
        fut = None
        if qos:
            fut = asyncio.get_running_loop().create_future()
            self._waiters[(PacketType.PUBACK, pid)] = fut
        self._write(encode(Publish(topic, payload, qos, retain, False, pid, properties or {}), self.version))
        return fut

    async def subscribe(self, *filters: str, qos: int = 1, timeout: float = 10.0) -> list[int]:
        pid = self._next_pid()
        fut = asyncio.get_running_loop().create_future()
        self._waiters[(PacketType.SUBACK, pid)] = fut
        self._write(encode(Subscribe(pid, [(f, SubOptions(qos)) for f in filters]), self.version))
        return (await asyncio.wait_for(fut, timeout)).reasons

    def send_raw(self, data: bytes) -> None:
        self._flush()
        if self.transport is not None:
            self.transport.write(data)

    async def disconnect(self) -> None:
        self._write(encode(Disconnect(), self.version))
        self._flush()
        if self.transport is not None:
            self.transport.close()
        if self.closed is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.closed), 5)

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()


async def connect_many(
    host: str, port: int, ids: list[str], *, version: int = 4, parallel: int = 100, **kw: Any
) -> list[MqttClient]:
    """Connect many clients, ``parallel`` at a time (a connection-rate limit is respected)."""
    on_message = kw.pop("on_message", None)
    sem = asyncio.Semaphore(parallel)

    async def one(cid: str) -> MqttClient:
        async with sem:
            c = MqttClient(cid, version=version, on_message=on_message)
            ack = await c.connect(host, port, **kw)
            if ack.reason:
                raise ConnectionError(f"{cid}: CONNACK {ack.reason}")
            return c

    clients = await asyncio.gather(*(one(i) for i in ids))
    return list(clients)


__all__ = ["MQTT_5", "MqttClient", "connect_many"]
