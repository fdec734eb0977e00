"""Errors raised by the codec; each carries the reason code the server closes with."""

from __future__ import annotations

from .constants import Reason


class MqttError(Exception):
    """A packet the peer must not have sent: the connection closes with ``reason``."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class MalformedPacket(MqttError):
    def __init__(self, message: str) -> None:
        super().__init__(Reason.MALFORMED_PACKET, message)


class ProtocolViolation(MqttError):
    def __init__(self, message: str, reason: Reason = Reason.PROTOCOL_ERROR) -> None:
        super().__init__(reason, message)


class PacketTooLarge(MqttError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(Reason.PACKET_TOO_LARGE, f"packet of {size} bytes exceeds {limit}")
        self.size = size
        self.limit = limit
