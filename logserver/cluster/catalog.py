"""The topics of the cluster, as consumer groups and offset commits see them in cluster
mode: names, partition counts and topic ids from etcd (``node.model``), the same source
as Metadata and Fetch v13+.

A broker's local storage only holds the topics it has a replica of, and gives each one
a topic id of its own; a group coordinator that answered with those ids would hand a
KIP-848 member topic ids Metadata never named (and that change with the coordinator).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from logserver.cluster.node import ClusterNode

__all__ = ["ClusterTopics"]


class ClusterTopics:
    """``logserver.groups.consumer.machine.TopicCatalog`` answered from ``node.model``."""

    def __init__(self, node: ClusterNode) -> None:
        self._node = node

    def topic_names(self) -> list[str]:
        return sorted(self._node.model.topics)

    def partition_count(self, topic: str) -> int | None:
        record = self._node.model.topics.get(topic)
        return None if record is None else record.partitions

    def topic_id(self, topic: str) -> bytes | None:
        record = self._node.model.topics.get(topic)
        return None if record is None else record.topic_id

    def topic_for_id(self, topic_id: bytes) -> str | None:
        return self._node.model.topic_for_id(topic_id)
