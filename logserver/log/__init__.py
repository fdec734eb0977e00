"""The commit log: Segment, OffsetIndex/TimeIndex, Log, producer state and LogManager.

Layered as Kafka layers it (see /work/shared/DESIGN.md); batches are stored and served
as opaque bytes, only their 61-byte headers are ever decoded.
"""

from logserver.log.config import LogConfig
from logserver.log.errors import (
    IndexFullError,
    InvalidTopicError,
    LogDirLockedError,
    LogError,
    OffsetOutOfRangeError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from logserver.log.log import Log
from logserver.log.manager import LogManager, TopicInfo
from logserver.log.producer_state import Decision, ProducerStateManager, Verdict
from logserver.log.segment import Segment

__all__ = [
    "Decision",
    "IndexFullError",
    "InvalidTopicError",
    "Log",
    "LogConfig",
    "LogDirLockedError",
    "LogError",
    "LogManager",
    "OffsetOutOfRangeError",
    "ProducerStateManager",
    "Segment",
    "TopicExistsError",
    "TopicInfo",
    "UnknownTopicOrPartitionError",
    "Verdict",
]
