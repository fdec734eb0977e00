"""Counters behind Kafka's replica and controller meters, for /metrics.

``IsrShrinksPerSec``/``IsrExpandsPerSec`` (ReplicaManager) count ISR changes of the
partitions this broker leads, whoever decided them (the leader for a lagging follower,
the controller for a dead broker); ``UncleanLeaderElectionsPerSec`` (ControllerStats)
counts the leaders this broker, as the controller, elected from outside the ISR. Fed from the etcd watch (ClusterModel.on_partition_change) and
the controller pass; read at scrape time (logserver/admin/metrics_cluster.py).
"""

from __future__ import annotations

from logserver.cluster.model import NO_LEADER, PartitionState


class ReplicaStats:
    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.unclean_leader_elections = 0

    def partition_changed(self, before: PartitionState | None,
                          after: PartitionState | None) -> None:
        """One partition state replaced in the model (the watch applied an etcd event)."""
        if before is None or after is None or after.leader != self.node_id:
            return
        old, new = set(before.isr), set(after.isr)
        if old - new:
            self.isr_shrinks += 1
        if new - old:
            self.isr_expands += 1

    def elected(self, before: PartitionState, after: PartitionState) -> None:
        """The controller wrote ``after`` over ``before``: an unclean election if the new
        leader was not in sync."""
        if after.leader in (before.leader, NO_LEADER):
            return
        if after.leader not in before.isr:
            self.unclean_leader_elections += 1
