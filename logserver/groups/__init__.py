"""Consumer groups: the classic group coordinator and committed offsets kept in the log.

- ``coordinator``: the facade the group handlers call; carries out the decisions below
  (parked requests as futures, timers, appends and their durability waits).
- ``membership``: the classic protocol's state machine, no I/O (Kafka's GroupCoordinator).
- ``offsets``: commit, fetch, delete and expire committed offsets, no I/O.
- ``decisions``: what the sans-I/O logic asks the glue to do (replies, timers, appends).
- ``timers``: timer keys as ``loop.call_later`` handles.
- ``loading``: replay of ``__consumer_offsets`` at start-up, and its rewrite.
- ``group``: one group's members, generation, protocol and state (Kafka's GroupMetadata).
- ``store``: ``__consumer_offsets`` appends, replay reads, rewrite (compaction).
- ``records``: Kafka's key/value schema of that topic.
- ``respond``: a coordinator future as a handler's response (now or awaitable).
"""

from logserver.groups.coordinator import MAX_GROUP_ID_LENGTH, GroupCoordinator
from logserver.groups.store import INTERNAL_TOPICS, OFFSETS_TOPIC

__all__ = ["INTERNAL_TOPICS", "MAX_GROUP_ID_LENGTH", "OFFSETS_TOPIC", "GroupCoordinator"]
