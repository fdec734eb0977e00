"""The brokers a Metadata answer names, as Kafka's metadata cache keeps them.

A broker's registration in etcd lives under its session lease, so a coordination hiccup
(etcd paused, every session lost at once, then each broker registering again) empties
the live set for a moment. Kafka's brokers answer Metadata from a cache that only a
newer published state replaces; clients such as librdkafka drop every broker a Metadata
answer leaves out, and then hang. So a broker that left is still named while

- the controller's published partition states still name it as a leader (the
  controller has not acted on its departure yet), or
- it left less than one session timeout ago while it led or was in sync somewhere, in a
  coordination hiccup: at least half of the brokers lost their sessions within that time
  (time to register again; Kafka's new active controller gives brokers the same grace).
  One broker dying (kill -9) is no hiccup: as in Kafka it is dropped once the controller
  has moved its leaderships, so clients stop dialling a dead address.

A broker that left cleanly (controlled shutdown: in no ISR, leading nothing) is dropped
at once, as a dead one is once the grace has passed and the controller moved its
leaderships. The answering broker always names itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from logserver.cluster.model import BrokerInfo, ClusterModel


class KnownBrokers:
    """Live brokers plus those that left recently or still lead (module docstring)."""

    def __init__(self, grace_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._grace_s = grace_s
        self._clock = clock
        self._seen: dict[int, BrokerInfo] = {}
        self._departed: dict[int, tuple[BrokerInfo, float]] = {}  # info, when it left
        #: every broker registered since this one started, as last registered: the
        #: admin API lists one that left as down, with its address
        self.ever: dict[int, BrokerInfo] = {}

    def observe(self, model: ClusterModel) -> None:
        """After the watch changed the live brokers: note who left, and when."""
        now = self._clock()
        gone = [node for node in self._seen if node not in model.brokers]
        if gone:
            held = _held(model)
            for node in gone:
                if node in held:
                    self._departed[node] = (self._seen[node], now)
        for node in model.brokers:
            self._departed.pop(node, None)
        self._seen = dict(model.brokers)
        self.ever.update(model.brokers)

    def listed(self, model: ClusterModel, own: BrokerInfo) -> dict[int, BrokerInfo]:
        """The brokers to name, by node id: live, kept (see the module), and ``own``."""
        out = dict(model.brokers)
        if self._departed:
            now = self._clock()
            leaders = {v.state.leader for v in model.partitions.values()}
            recent = {node for node, (_, since) in self._departed.items()
                      if now - since < self._grace_s}
            hiccup = len(recent) * 2 >= len(recent) + len(model.brokers)
            for node, (info, _since) in list(self._departed.items()):
                if node in leaders or (hiccup and node in recent):
                    out.setdefault(node, info)
                elif node not in recent and node not in model.brokers:
                    del self._departed[node]
        out.setdefault(own.node_id, own)
        return out


def _held(model: ClusterModel) -> set[int]:
    """Brokers that lead or are in sync for some partition."""
    out: set[int] = set()
    for versioned in model.partitions.values():
        out.add(versioned.state.leader)
        out.update(versioned.state.isr)
    return out
