"""Kafka's other names for our settings, and Kafka's settings that mean nothing here.

So that a stock Kafka ``server.properties`` starts as it is: ``broker.id`` is our
``node.id``, ``log.retention.hours`` is ``log.retention.ms`` in other units, and thread
pools, socket buffers, ZooKeeper and KRaft quorum settings are warned about (once each,
by name) and ignored instead of stopping start-up.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

log = logging.getLogger(__name__)

__all__ = ["ALIASES", "IGNORED", "Alias", "resolve_aliases"]


@dataclass(frozen=True)
class Alias:
    """``name`` stands for ``target``; an integer value is multiplied by ``factor``."""

    target: str
    factor: int | None = None  # None: the value is taken as it is
    rank: int = 0  # among aliases of one target, the higher rank wins (Kafka: ms > minutes > hours)


ALIASES: dict[str, Alias] = {
    "broker.id": Alias("node.id"),
    "log.dir": Alias("log.dirs"),
    "log.retention.minutes": Alias("log.retention.ms", 60_000, rank=2),
    "log.retention.hours": Alias("log.retention.ms", 3_600_000, rank=1),
    "log.roll.hours": Alias("log.roll.ms", 3_600_000, rank=1),
}

# Kafka settings a stock server.properties carries that have no meaning for one Python
# process with one data directory and no replication; the value is why.
IGNORED: dict[str, str] = {
    "num.network.threads": "one event loop serves every connection",
    "num.io.threads": "requests are handled on the event loop, disk work on a small pool",
    "num.recovery.threads.per.data.dir": "recovery runs in one thread",
    "num.replica.fetchers": "no replication",
    "socket.send.buffer.bytes": "the kernel's socket buffer sizes are used",
    "socket.receive.buffer.bytes": "the kernel's socket buffer sizes are used",
    "share.coordinator.state.topic.replication.factor": "one node: replication factor 1",
    "share.coordinator.state.topic.min.isr": "one node: no in-sync replica set",
    "zookeeper.connect": "no ZooKeeper: metadata lives in the data directory",
    "zookeeper.connection.timeout.ms": "no ZooKeeper",
    "zookeeper.session.timeout.ms": "no ZooKeeper",
    "process.roles": "one process is broker and its own controller",
    "controller.quorum.voters": "no controller quorum",
    "controller.quorum.bootstrap.servers": "no controller quorum",
    "controller.listener.names": "no controller listener (its listeners are not opened)",
    "inter.broker.listener.name": "no other brokers",
    "security.inter.broker.protocol": "no other brokers",
    "sasl.mechanism.inter.broker.protocol": "no other brokers",
    "ssl.endpoint.identification.algorithm": "no other brokers (clients verify the host name)",
}


def resolve_aliases(raw: Mapping[str, str], where: str,
                    problem: type[ValueError] = ValueError) -> dict[str, str]:
    """Kafka's names in ``raw`` (one source: a file, the environment, flags) as ours.

    A setting given under its own name beats its aliases in the same source, as in Kafka.
    """
    result = {name: value for name, value in raw.items() if name not in ALIASES}
    chosen: dict[str, int] = {}
    for name, value in raw.items():
        alias = ALIASES.get(name)
        if alias is None or alias.target in raw or chosen.get(alias.target, -1) > alias.rank:
            continue
        if alias.factor is not None:
            try:
                amount = int(value.strip())
            except ValueError:
                raise problem(f"invalid value for setting {name!r} ({where}): expected an "
                              f"integer, got {value!r}") from None
            value = str(-1 if amount < 0 else amount * alias.factor)
        if name == "broker.id" and value.strip() == "-1":
            continue  # Kafka: "generate one"; the default node.id serves
        result[alias.target], chosen[alias.target] = value, alias.rank
    return result


def drop_ignored(raw: Mapping[str, str], where: str, warned: set[str]) -> dict[str, str]:
    """``raw`` without the settings in IGNORED, warning once per name (``warned``)."""
    result = {}
    for name, value in raw.items():
        if name in IGNORED:
            if name not in warned:
                warned.add(name)
                log.warning("ignoring Kafka setting %s (%s): %s", name, where, IGNORED[name])
        else:
            result[name] = value
    return result
