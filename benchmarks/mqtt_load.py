"""A lean MQTT 3.1.1 publish load generator for the throughput workloads.

The general test client (``tests/helpers/mqtt_client.py``) encodes every PUBLISH through
the codec and resolves one future per acknowledgement; at 10-20k messages/s that cost
more CPU than mosquitto spent serving them, so on a 2-core machine it, not the server,
set the pace. Here each connection holds one pre-encoded PUBLISH (only the packet id
changes), sends the next one from ``data_received`` as each acknowledgement arrives
(one write per event-loop turn), and counts: the server's work per message dominates.

- QoS 1: ``window`` PUBLISHes in flight per connection; a PUBACK counts one message.
- QoS 0: QoS 0 PUBLISHes in bursts of ``burst``, each burst followed by a PINGREQ;
  ``window`` bursts in flight. A server answers packets of a connection in order, so
  a PINGRESP means the burst before it was read and handled (for the bridge: handed
  to its producer, whose full buffer stops reading); each PINGRESP counts ``burst``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from mqtt_bridge.codec import Connect, SubOptions, Subscribe, encode

_PINGREQ = b"\xc0\x00"
_PID = [i.to_bytes(2, "big") for i in range(65536)]


def _remaining_length(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def publish_template(topic: str, payload: bytes, qos: int) -> tuple[bytes, bytes]:
    """(bytes before the packet id, bytes after it); QoS 0 has no packet id: (packet, b"")."""
    t = topic.encode()
    body = len(t).to_bytes(2, "big") + t
    if qos == 0:
        return bytes([0x30]) + _remaining_length(len(body) + len(payload)) + body + payload, b""
    head = bytes([0x30 | (qos << 1)]) + _remaining_length(len(body) + 2 + len(payload)) + body
    return head, payload


@dataclass
class Counter:
    """Messages acknowledged across all connections; ``running`` False stops new sends."""

    acked: int = 0
    sent: int = 0
    running: bool = True


class Publisher(asyncio.Protocol):
    """One device connection driving QoS 0 or 1 publishes as described in the module."""

    def __init__(self, client_id: str, topic: str, payload: bytes, qos: int, window: int,
                 counter: Counter, burst: int = 20) -> None:
        self.client_id = client_id
        self.qos = qos
        self.window = window
        self.burst = burst
        self.counter = counter
        self.head, self.tail = publish_template(topic, payload, qos)
        self.transport: asyncio.Transport | None = None
        self.connack: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.outstanding = 0
        self._pid = 0
        self._buf = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        assert self.transport is not None
        self.transport.write(encode(Connect(self.client_id, 4, True, 60, None, None, None, {}), 4))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.connack.done():
            self.connack.set_exception(ConnectionError(f"{self.client_id}: connection lost"))
        if not self.closed.done():
            self.closed.set_result(None)

    def _batch(self, n: int) -> list[bytes]:
        """``n`` more units of work (QoS 1: PUBLISHes; QoS 0: bursts + PINGREQ)."""
        out: list[bytes] = []
        if self.qos == 0:
            for _ in range(n):
                out += [self.head] * self.burst
                out.append(_PINGREQ)
            self.counter.sent += n * self.burst
        else:
            pid = self._pid
            head, tail = self.head, self.tail
            for _ in range(n):
                pid = pid % 65535 + 1
                out += (head, _PID[pid], tail)
            self._pid = pid
            self.counter.sent += n
        self.outstanding += n
        return out

    def start(self) -> None:
        assert self.transport is not None
        self.transport.writelines(self._batch(self.window))

    def data_received(self, data: bytes) -> None:
        buf = self._buf + data if self._buf else data
        i, n = 0, len(buf)
        done = 0
        while i + 2 <= n:
            kind = buf[i] >> 4
            length, shift, j = 0, 0, i + 1
            while j < n:
                b = buf[j]
                length |= (b & 0x7F) << shift
                shift += 7
                j += 1
                if not b & 0x80:
                    break
            else:
                break
            if j + length > n:
                break
            if kind == 4 or kind == 13:  # PUBACK / PINGRESP
                done += 1
            elif kind == 2 and not self.connack.done():  # CONNACK: return code last
                self.connack.set_result(buf[j + length - 1])
            i = j + length
        self._buf = buf[i:]
        if done:
            self.outstanding -= done
            self.counter.acked += done * (self.burst if self.qos == 0 else 1)
            if self.counter.running and self.transport is not None:
                self.transport.writelines(self._batch(done))


async def connect_publishers(host: str, port: int, devices: int, qos: int, window: int,
                             size: int, counter: Counter, burst: int = 20,
                             parallel: int = 50) -> list[Publisher]:
    """``devices`` connected publishers on ``devices/bench-pub-N/telemetry`` (not started)."""
    loop = asyncio.get_running_loop()
    payload = b"x" * size
    sem = asyncio.Semaphore(parallel)

    async def one(i: int) -> Publisher:
        cid = f"bench-pub-{i}"
        async with sem:
            _t, p = await loop.create_connection(
                lambda: Publisher(cid, f"devices/{cid}/telemetry", payload, qos, window, counter,
                                  burst), host, port)
            code = await asyncio.wait_for(p.connack, 10)
            if code:
                raise ConnectionError(f"{cid}: CONNACK {code}")
            return p

    return list(await asyncio.gather(*(one(i) for i in range(devices))))


class Subscriber(asyncio.Protocol):
    """One fan-out device: subscribes to one filter, acknowledges every QoS 1/2 PUBLISH
    (PUBACK / PUBREC) in one write per read, and hands each payload to ``on_payload``
    with the time it was read. Parses only the fixed header, topic length and packet id:
    10,000 of these in one process must not be what delays a notice."""

    def __init__(self, client_id: str, topic_filter: str, qos: int,
                 on_payload: Callable[[bytes, float], None]) -> None:
        self.client_id = client_id
        self.filter = topic_filter
        self.qos = qos
        self.on_payload = on_payload
        self.transport: asyncio.Transport | None = None
        loop = asyncio.get_running_loop()
        self.connack: asyncio.Future[int] = loop.create_future()
        self.suback: asyncio.Future[int] = loop.create_future()
        self._buf = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        assert self.transport is not None
        self.transport.write(encode(Connect(self.client_id, 4, True, 60, None, None, None, {}), 4))

    def connection_lost(self, exc: Exception | None) -> None:
        err = ConnectionError(f"{self.client_id}: connection lost")
        for fut in (self.connack, self.suback):
            if not fut.done():
                fut.set_exception(err)

    def subscribe(self) -> None:
        assert self.transport is not None
        self.transport.write(encode(Subscribe(1, [(self.filter, SubOptions(self.qos))]), 4))

    def data_received(self, data: bytes) -> None:
        now = time.monotonic()
        buf = self._buf + data if self._buf else data
        i, n = 0, len(buf)
        acks: list[bytes] = []
        while i + 2 <= n:
            first = buf[i]
            length, shift, j = 0, 0, i + 1
            while j < n:
                b = buf[j]
                length |= (b & 0x7F) << shift
                shift += 7
                j += 1
                if not b & 0x80:
                    break
            else:
                break
            end = j + length
            if end > n:
                break
            kind = first >> 4
            if kind == 3:  # PUBLISH
                qos = (first >> 1) & 3
                pos = j + 2 + ((buf[j] << 8) | buf[j + 1])
                if qos:
                    acks.append(bytes((0x40 if qos == 1 else 0x50, 2)) + buf[pos:pos + 2])
                    pos += 2
                self.on_payload(buf[pos:end], now)
            elif kind == 2 and not self.connack.done():
                self.connack.set_result(buf[end - 1])
            elif kind == 9 and not self.suback.done():
                self.suback.set_result(buf[end - 1])
            elif kind == 6:  # PUBREL (QoS 2): complete it
                acks.append(b"\x70\x02" + buf[j:j + 2])
            i = end
        self._buf = buf[i:]
        if acks and self.transport is not None:
            self.transport.write(b"".join(acks))


async def connect_subscribers(host: str, port: int, ids: list[str], topic_filter: str,
                              qos: int, on_payload: Callable[[bytes, float], None],
                              parallel: int = 100) -> list[Subscriber]:
    """Devices connected and subscribed (SUBACK checked), ``parallel`` at a time."""
    loop = asyncio.get_running_loop()
    sem = asyncio.Semaphore(parallel)

    async def one(cid: str) -> Subscriber:
        async with sem:
            _t, s = await loop.create_connection(
                lambda: Subscriber(cid, topic_filter, qos, on_payload), host, port)
            code = await asyncio.wait_for(s.connack, 10)
            if code:
                raise ConnectionError(f"{cid}: CONNACK {code}")
            s.subscribe()
            granted = await asyncio.wait_for(s.suback, 10)
            if granted >= 0x80:
                raise ConnectionError(f"{cid}: SUBACK {granted:#x}")
            return s

    return list(await asyncio.gather(*(one(c) for c in ids)))
