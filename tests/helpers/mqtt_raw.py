"""A blocking raw-socket MQTT client for the bridge tests: the test sends and reads
every packet itself (encoded and decoded with mqtt_bridge's own codec)."""

from __future__ import annotations

import socket
import time

from helpers.mqtt_procs import HOST
from mqtt_bridge.codec import (
    Ack,
    Connack,
    Connect,
    PacketReader,
    PacketType,
    Publish,
    Suback,
    SubOptions,
    Subscribe,
    encode,
)


class Raw:
    """A blocking raw-socket MQTT client: every packet is sent and read by the test."""

    def __init__(self, port: int, version: int = 4) -> None:
        self.sock = socket.create_connection((HOST, port), timeout=10)
        self.version = version
        self.reader = PacketReader(version=version)
        self.pending: list = []

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def packet(self, timeout: float = 10) -> object:
        deadline = time.monotonic() + timeout
        while not self.pending:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed by the bridge")
            self.pending.extend(self.reader.feed(data))
        return self.pending.pop(0)

    def connect(self, cid: str, clean: bool, props: dict | None = None) -> Connack:
        self.send(encode(Connect(cid, self.version, clean, 60, None, None, None, props or {}), self.version))
        ack = self.packet()
        assert isinstance(ack, Connack) and ack.reason == 0, ack
        return ack

    def expect_ack(self, kind: PacketType, pid: int) -> Ack:
        p = self.packet()
        assert isinstance(p, Ack) and p.kind == kind and p.packet_id == pid, p
        return p

    def publish2(self, topic: str, payload: bytes, pid: int, dup: bool = False) -> None:
        self.send(encode(Publish(topic, payload, 2, False, dup, pid), self.version))

    def subscribe(self, topic_filter: str, qos: int) -> list[int]:
        self.send(encode(Subscribe(1, [(topic_filter, SubOptions(qos))]), self.version))
        p = self.packet()
        assert isinstance(p, Suback), p
        return p.reasons

    def close(self) -> None:
        self.sock.close()
