"""The partitions a Fetch asks for, each once, as Kafka reads a FetchRequest.

Kafka's broker turns the request's topics and partitions into a map keyed by
topic-partition (``FetchRequest.fetchData``): a partition named twice is answered once,
in the place of its first mention, with the offset and size of its last one. A request
that names a partition 1,900 times therefore costs one read, not 1,900.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["Wanted", "unique_partitions"]

#: [(topic, [FetchPartition, ...]), ...]: topics in first-mention order.
Wanted = list[tuple[str, list[Any]]]


def unique_partitions(topics: Iterable[Any]) -> Wanted:
    """``FetchRequest.topics`` with every (topic, partition) once (the last mention wins)."""
    by_topic: dict[str, dict[int, Any]] = {}
    for topic in topics:
        partitions = by_topic.setdefault(topic.topic, {})
        for wanted in topic.partitions:
            partitions[wanted.partition] = wanted  # keeps the first position, last value
    return [(name, list(partitions.values())) for name, partitions in by_topic.items()]
