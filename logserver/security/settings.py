"""How the operator turns authorization on, under Kafka's setting names.

``authorizer.class.name`` names Kafka's own authorizers (the KRaft StandardAuthorizer or
the ZooKeeper-era AclAuthorizer, which decide the same way); both mean this server's
authorizer. Anything else is refused at start-up: a server.properties that names a
custom authorizer expects checks we cannot make, and serving without them would be
serving open.
"""

from __future__ import annotations

__all__ = ["KAFKA_AUTHORIZERS", "parse_authorizer_class"]

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
