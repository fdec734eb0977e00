"""Replication throttles as Kafka's ReplicationQuotaManager applies them (KIP-73).

Two dynamic broker configs bound the bytes per second of throttled replication on each
broker: ``leader.replication.throttled.rate`` for what it sends to followers as leader,
``follower.replication.throttled.rate`` for what its fetchers take in. Which replicas
are throttled is said per topic: ``leader.replication.throttled.replicas`` lists the
``PARTITION:BROKER`` pairs whose broker, leading, is throttled when it serves that
partition, ``follower.replication.throttled.replicas`` the pairs whose broker, following,
is throttled fetching it; ``*`` means every replica of the topic. As in Kafka only
replicas outside the ISR are throttled (a reassignment's new ones), so a throttle never
slows acks=all writes.

When a quota is exceeded the leader leaves the throttled partitions out of its Fetch
response (they come back empty) and the follower leaves them out of its next Fetch; the
bytes that do pass are counted afterwards. The count decays at the rate (a leaky bucket),
so over any stretch of time the throttled bytes exceed ``rate * seconds`` by at most what
one Fetch carried when the quota was last under, and the throttled partitions of a
Fetch get at most one second's worth of the rate together (the leader: the first one
that reads uses the quota up for the others; unless its first batch is larger, KIP-74):
a throttled move of S bytes at R bytes/s takes at least S/R - 1 seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from logserver.broker_overrides import Overlay

if TYPE_CHECKING:
    from logserver.cluster.model import ClusterModel
    from logserver.services import BrokerServices

__all__ = ["FOLLOWER_RATE", "LEADER_RATE", "ReplicationQuota", "ReplicationThrottle", "listed"]

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
UNLIMITED = 2**63 - 1  # Kafka's default rate: Long.MAX_VALUE, no throttle
MAX_FETCH_BYTES = 2**31 - 1


def listed(value: str | None, partition: int, broker: int) -> bool:
    """Is ``PARTITION:BROKER`` in a throttled-replicas value (or is it ``*``)?"""
    if not value:
        return False
    if value.strip() == "*":
        return True
    for pair in value.split(","):
        p, _, b = pair.strip().partition(":")
        if p.strip() == str(partition) and b.strip() == str(broker):
            return True
    return False


class ReplicationQuota:
    """Throttled bytes against a rate: exceeded while the bytes counted so far have not
    drained at ``rate`` bytes per second."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._backlog = 0.0  # bytes not yet covered by the rate
        self._at = clock()

    def _drain(self, rate: int) -> None:
        now = self._clock()
        self._backlog = max(0.0, self._backlog - rate * (now - self._at))
        self._at = now

    def exceeded(self, rate: int) -> bool:
        if rate >= UNLIMITED:  # no throttle: nothing owed when one is set again
            self._backlog = 0.0
            return False
        self._drain(rate)
        return self._backlog > 0

    def wait_s(self, rate: int) -> float:
        """Seconds until the bytes counted so far have drained at ``rate``."""
        if rate >= UNLIMITED:
            self._backlog = 0.0
            return 0.0
        self._drain(rate)
        return self._backlog / rate

    def allowance(self, rate: int) -> int:
        """0 while exceeded, else ``rate`` (one second's worth, capped at 2 GiB)."""
        return 0 if self.exceeded(rate) else min(rate, MAX_FETCH_BYTES)

    def record(self, size: int, rate: int) -> None:
        if rate >= UNLIMITED:
            self._backlog = 0.0
            return
        if size <= 0:
            return
        self._drain(rate)
        self._backlog += size


class ThrottledNode(Protocol):
    """What the quotas read of the cluster node (logserver.cluster.node.ClusterNode):
    its id, the cluster model, and its broker's settings."""

    node_id: int
    model: ClusterModel
    broker: BrokerServices


class ReplicationThrottle:
    """One broker's two quotas and the questions its Fetch handler (as leader) and its
    replica fetchers (as follower) ask, answered from the cluster model and the dynamic
    broker configs."""

    def __init__(self, node: ThrottledNode) -> None:
        self._node = node
        self.leader = ReplicationQuota()
        self.follower = ReplicationQuota()

    def rate(self, name: str) -> int:
        broker = self._node.broker
        overlay: Mapping[str, Any] = Overlay(broker.config, broker.storage.broker_overrides().effective())
        try:
            return int(overlay[name])
        except (KeyError, TypeError, ValueError):
            return UNLIMITED

    def _configs(self, topic: str) -> Mapping[str, str]:
        record = self._node.model.topics.get(topic)
        return {} if record is None else record.configs

    def leader_throttled(self, topic: str, partition: int, replica_id: int) -> bool:
        """Is what this leader sends ``replica_id`` for the partition throttled?"""
        node = self._node
        state = node.model.partition(topic, partition)
        return (state is not None and replica_id not in state.isr
                and listed(self._configs(topic).get(LEADER_REPLICAS), partition, node.node_id))

    def follower_throttled(self, topic: str, partition: int) -> bool:
        """Is this broker's fetching of the partition throttled?"""
        node = self._node
        state = node.model.partition(topic, partition)
        return (state is not None and node.node_id not in state.isr
                and listed(self._configs(topic).get(FOLLOWER_REPLICAS), partition, node.node_id))

    def leader_allowance(self) -> int:
        """The most bytes of a throttled partition one Fetch may carry to a follower now:
        0 while the leader quota is used up, else one second's worth of the rate."""
        return self.leader.allowance(self.rate(LEADER_RATE))

    def follower_allowance(self) -> int:
        """The same for what this broker's fetchers ask of a throttled partition."""
        return self.follower.allowance(self.rate(FOLLOWER_RATE))

    def follower_wait_s(self) -> float:
        """How long this broker's fetchers wait before asking for throttled partitions
        again (at least 10 ms, at most 1 s)."""
        return min(1.0, max(0.01, self.follower.wait_s(self.rate(FOLLOWER_RATE))))

    def leader_sent(self, size: int) -> None:
        self.leader.record(size, self.rate(LEADER_RATE))

    def follower_received(self, size: int) -> None:
        self.follower.record(size, self.rate(FOLLOWER_RATE))
