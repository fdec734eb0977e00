"""Exceptions raised by the log layer; the broker maps each to one Kafka error code."""

from __future__ import annotations

__all__ = [
    "CorruptLogError",
    "IndexFullError",
    "InvalidTopicError",
    "LogDirLockedError",
    "LogError",
    "OffsetOutOfRangeError",
    "TopicExistsError",
    "UnknownTopicOrPartitionError",
]


class LogError(Exception):
    """Base class of every error the log layer raises on purpose."""


class OffsetOutOfRangeError(LogError):
    """Fetch offset below log start or above log end: OFFSET_OUT_OF_RANGE (1)."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"offset {offset} is outside the log's range [{log_start_offset}, {log_end_offset}]"
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class IndexFullError(LogError):
    """An index has no room left; the segment must roll before appending more."""


class TopicExistsError(LogError):
    """create_topic for a name already present: TOPIC_ALREADY_EXISTS (36)."""


class InvalidTopicError(LogError):
    """Illegal topic name (INVALID_TOPIC_EXCEPTION, 17) or partition count (INVALID_PARTITIONS, 37)."""


class UnknownTopicOrPartitionError(LogError, KeyError):
    """No such topic or partition: UNKNOWN_TOPIC_OR_PARTITION (3)."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class LogDirLockedError(LogError):
    """Another process holds the data directory's lock file."""


class DataDirError(LogError):
    """The data directory's own files cannot be read: another version's layout, or damage."""


class CorruptLogError(LogError):
    """Recovery would have to drop valid data that is not a torn tail.

    A torn tail (the last writes of a crash: a partial batch, garbage or zeros with no
    valid batch after them) is truncated silently. Damage with valid batches after it, in
    the same segment or in later ones, is refused: start-up stops and says where, unless
    ``log.recovery.allow.data.loss=true`` or ``logserver repair`` is used.
    """
