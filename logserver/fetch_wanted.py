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

#: [(FetchTopic, [FetchPartition, ...]), ...]: topics in first-mention order (the topic
#: object is the first mention's; from Fetch v13 a topic is named by its id).
Wanted = list[tuple[Any, list[Any]]]


def unique_partitions(topics: Iterable[Any], by_id: bool = False) -> Wanted:
    """``FetchRequest.topics`` with every (topic, partition) once (the last mention wins);
    topics are told apart by name, or by topic id (``by_id``, Fetch v13+)."""
    by_topic: dict[Any, tuple[Any, dict[int, Any]]] = {}
    for topic in topics:
        key = bytes(topic.topic_id) if by_id else topic.topic
        _, partitions = by_topic.setdefault(key, (topic, {}))
        for wanted in topic.partitions:
            partitions[wanted.partition] = wanted  # keeps the first position, last value
    return [(first, list(partitions.values())) for first, partitions in by_topic.values()]
