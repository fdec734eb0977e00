"""Consumer groups: the classic group coordinator and committed offsets kept in the log.

- ``group``: one group's members, generation, protocol and state (Kafka's GroupMetadata).
- ``coordinator``: the protocol decisions, timers and error codes (Kafka's GroupCoordinator).
- ``store``: ``__consumer_offsets`` appends, replay at start-up, rewrite (compaction).
- ``records``: Kafka's key/value schema of that topic.
"""

from logserver.groups.coordinator import MAX_GROUP_ID_LENGTH, GroupCoordinator
from logserver.groups.store import INTERNAL_TOPICS, OFFSETS_TOPIC

__all__ = ["INTERNAL_TOPICS", "MAX_GROUP_ID_LENGTH", "OFFSETS_TOPIC", "GroupCoordinator"]
