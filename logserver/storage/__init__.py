"""Storage engines (``StorageEngine``: the client-facing ``Storage`` and the replica-only
``ReplicaLog``): the segment log and an in-memory one."""

from logserver.storage.api import (
    EARLIEST,
    LATEST,
    MAX_TIMESTAMP,
    AppendResult,
    InvalidConfigError,
    InvalidTopicError,
    ListedOffset,
    ReadResult,
    ReplicaLog,
    Storage,
    StorageEngine,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)

__all__ = [
    "EARLIEST",
    "LATEST",
    "MAX_TIMESTAMP",
    "AppendResult",
    "InvalidConfigError",
    "InvalidTopicError",
    "ListedOffset",
    "ReadResult",
    "ReplicaLog",
    "Storage",
    "StorageEngine",
    "TopicExistsError",
    "UnknownTopicOrPartitionError",
]
