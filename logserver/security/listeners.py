"""Which security protocol each listener speaks, checked once at start-up.

A listener's name picks its protocol through ``listener.security.protocol.map`` (the
standard names map to themselves). Whatever the server cannot honour (an unmapped name,
a TLS listener without a keystore, client authentication without a truststore, two
listeners on one port) stops start-up with one line naming the setting: a listener that
was asked to be secure is never served in plain text.
"""

from __future__ import annotations

import ssl
from collections import ChainMap
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from logserver.config import ConfigError, Listener
from logserver.security.settings import parse_protocol_map
from logserver.security.tls import TlsSettingsError, server_context

__all__ = ["ListenerSecurity", "https_context", "listener_security"]


@dataclass(frozen=True)
class ListenerSecurity:
    """What a connection accepted on one listener needs to know about its security."""

    name: str
    protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanisms: tuple[str, ...] = ()
    max_unauthenticated_bytes: int = 524288

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def listener_security(config: Mapping[str, Any]) -> dict[str, ListenerSecurity]:
    """Listener name -> its security; raises ConfigError (one line) for what cannot be served."""
    protocols = parse_protocol_map(config["listener.security.protocol.map"])
    listeners: list[Listener] = config["listeners"]
    names: set[str] = set()
    ports: set[int] = set()
    for listener in listeners:
        if listener.name in names:
            raise ConfigError(f"invalid value for setting 'listeners': listener name {listener.name} "
                              "is used twice (each listener needs its own name)")
        names.add(listener.name)
        if listener.port != 0 and listener.port in ports:
            raise ConfigError(f"invalid value for setting 'listeners': port {listener.port} is used "
                              "by two listeners")
        ports.add(listener.port)
        if listener.name not in protocols:
            raise ConfigError(
                f"listener {listener} has no security protocol: its name must be one of "
                f"PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL or mapped in "
                f"listener.security.protocol.map (e.g. {listener.name}:SASL_SSL)")
    for listener in config.get("advertised.listeners") or []:
        if listener.name not in names:
            raise ConfigError(f"invalid value for setting 'advertised.listeners': {listener} names "
                              f"no listener in listeners ({', '.join(sorted(names))})")
    per_listener: Mapping[str, Mapping[str, Any]] = getattr(config, "per_listener", {})
    for name in per_listener:
        if name not in names:
            raise ConfigError(f"listener.name.{name.lower()}.* settings name no listener in "
                              f"listeners ({', '.join(sorted(names))})")
    result: dict[str, ListenerSecurity] = {}
    for listener in listeners:
        protocol = protocols[listener.name]
        # Kafka: listener.name.<listener>.<setting> wins over <setting> for that listener.
        settings = ChainMap(dict(per_listener.get(listener.name, {})), dict(config))
        context = None
        if protocol in ("SSL", "SASL_SSL"):
            try:
                context = server_context(settings)
            except TlsSettingsError as exc:
                raise ConfigError(f"listener {listener} ({protocol}): {exc}") from exc
        result[listener.name] = ListenerSecurity(
            name=listener.name, protocol=protocol, ssl_context=context,
            sasl_mechanisms=tuple(settings["sasl.enabled.mechanisms"])
            if protocol.startswith("SASL_") else (),
            max_unauthenticated_bytes=config["sasl.server.max.receive.size"])
    return result


def https_context(config: Mapping[str, Any], listeners: list[Listener]) -> ssl.SSLContext | None:
    """The TLS context of ``https://`` HTTP listeners (the REST Proxy): the Kafka
    listeners' ``ssl.*`` settings, as Confluent's REST Proxy takes its ``ssl.*``; None
    when no listener is https. ConfigError (one line) when they cannot be served."""
    secure = [listener for listener in listeners if listener.name == "HTTPS"]
    if not secure:
        return None
    try:
        return server_context(config)
    except TlsSettingsError as exc:
        raise ConfigError(f"rest.proxy.listeners {secure[0]}: {exc}") from exc
