"""Parsers for the security settings, under Kafka's names and with Kafka's values.

Kept apart from :mod:`logserver.config` (which lists the settings) so that the config
module does not import the TLS and SASL machinery just to parse a string.

``authorizer.class.name`` names Kafka's own authorizers (the KRaft StandardAuthorizer or
the ZooKeeper-era AclAuthorizer, which decide the same way); both mean this server's
authorizer. Anything else is refused at start-up: a server.properties that names a
custom authorizer expects checks we cannot make, and serving without them would be
serving open.
"""

from __future__ import annotations

import re

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in SECURITY_PROTOCOLS)
CLIENT_AUTH = ("none", "requested", "required")


def parse_protocol_map(text: str) -> dict[str, str]:
    """``NAME:PROTOCOL,...`` (``listener.security.protocol.map``) as a dict, names upper-cased."""
    result: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or not protocol:
            raise ValueError(f"expected LISTENER_NAME:SECURITY_PROTOCOL, got {item!r}")
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"unknown security protocol {protocol!r} for listener {name} "
                             f"(one of {', '.join(SECURITY_PROTOCOLS)})")
        if name in result and result[name] != protocol:
            raise ValueError(f"listener {name} is mapped twice")
        result[name] = protocol
    return result


def normalize_protocol_map(text: str) -> str:
    return ",".join(f"{name}:{protocol}" for name, protocol in parse_protocol_map(text).items())


def parse_store_type(text: str) -> str:
    kind = text.strip().upper()
    if kind != "PEM":
        raise ValueError(f"only PEM is supported, got {text.strip()!r} "
                         "(convert a JKS or PKCS12 store to PEM files with keytool/openssl)")
    return kind


def parse_client_auth(text: str) -> str:
    value = text.strip().lower()
    if value not in CLIENT_AUTH:
        raise ValueError(f"expected one of {', '.join(CLIENT_AUTH)}, got {text!r}")
    return value


def parse_mechanisms(text: str) -> list[str]:
    """``sasl.enabled.mechanisms``: the ones we implement, in the order given."""
    mechanisms: list[str] = []
    for item in filter(None, (part.strip().upper() for part in text.split(","))):
        if item not in SASL_MECHANISMS:
            raise ValueError(f"SASL mechanism {item} is not supported "
                             f"(supported: {', '.join(SASL_MECHANISMS)})")
        if item not in mechanisms:
            mechanisms.append(item)
    if not mechanisms:
        raise ValueError("at least one SASL mechanism is required")
    return mechanisms


TLS_VERSIONS = ("TLSv1.2", "TLSv1.3")


def parse_tls_versions(text: str) -> list[str]:
    """``ssl.enabled.protocols``: TLSv1.2 and/or TLSv1.3 (older ones are refused)."""
    versions = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        match = next((v for v in TLS_VERSIONS if v.lower() == item.lower()), None)
        if match is None:
            raise ValueError(f"{item} is not supported (supported: {', '.join(TLS_VERSIONS)})")
        if match not in versions:
            versions.append(match)
    if not versions:
        raise ValueError("at least one TLS version is required")
    return versions


# Kafka's per-listener form of a setting: listener.name.<listener>.<setting>.
PER_LISTENER_SETTINGS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.certificate.chain",
    "ssl.keystore.key", "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.certificates", "ssl.client.auth", "ssl.enabled.protocols",
    "sasl.enabled.mechanisms"})
_PER_LISTENER = re.compile(r"listener\.name\.([A-Za-z0-9_]+)\.(.+)")
_JAAS = re.compile(r"(listener\.name\.[A-Za-z0-9_]+\.)?([A-Za-z0-9-]+\.)?sasl\.jaas\.config")
JAAS_IGNORED = ("SASL users are the SCRAM credentials in the data directory (logserver scram, "
                "AlterUserScramCredentials), not JAAS login modules")


def per_listener_setting(key: str) -> tuple[str, str] | None:
    """(LISTENER, setting) for ``listener.name.<listener>.<setting>``, else None."""
    match = _PER_LISTENER.fullmatch(key)
    if match is None or match.group(2) not in PER_LISTENER_SETTINGS:
        return None
    return match.group(1).upper(), match.group(2)


def is_jaas_setting(key: str) -> bool:
    return _JAAS.fullmatch(key) is not None

KAFKA_AUTHORIZERS = (
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
)


def parse_authorizer_class(text: str) -> str:
    """The class name, "" when unset (no authorization); ValueError for any other class."""
    name = text.strip()
    if name and name not in KAFKA_AUTHORIZERS:
        raise ValueError(f"unsupported authorizer {name!r}; use one of {', '.join(KAFKA_AUTHORIZERS)} "
                         "(both mean this server's ACL authorizer) or leave it empty")
    return name
