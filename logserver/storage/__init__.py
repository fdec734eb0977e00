"""Storage engines behind one interface (``Storage``): the segment log and an in-memory one."""

from logserver.storage.api import (
    EARLIEST,
    LATEST,
    MAX_TIMESTAMP,
    AppendResult,
    InvalidConfigError,
    InvalidTopicError,
    ListedOffset,
    ReadResult,
    Storage,
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
    "Storage",
    "TopicExistsError",
    "UnknownTopicOrPartitionError",
]
