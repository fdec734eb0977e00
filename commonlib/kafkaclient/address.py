"""Bootstrap addresses as Kafka's clients write them: ``HOST:PORT`` lists."""

from __future__ import annotations

__all__ = ["DEFAULT_PORT", "parse_bootstrap", "parse_hostport"]

DEFAULT_PORT = 9092


def parse_hostport(text: str, default_host: str = "localhost") -> tuple[str, int]:
    """``HOST:PORT`` (or ``PLAINTEXT://HOST:PORT``, ``[::1]:PORT``, ``HOST``) as a pair;
    ValueError for a port that is not a number."""
    text = text.strip()
    if "://" in text:
        text = text.split("://", 1)[1]
    host, sep, port = text.rpartition(":")
    if not sep or "]" in port:
        host, port = text, ""
    host = host.strip("[]") or default_host
    return host, int(port) if port else DEFAULT_PORT


def parse_bootstrap(text: str, default_host: str = "localhost") -> list[tuple[str, int]]:
    """``bootstrap.servers``: comma-separated ``HOST:PORT``, blanks left out."""
    return [parse_hostport(part, default_host) for part in text.split(",") if part.strip()]
