"""The commit log: Segment, OffsetIndex/TimeIndex, LocalLog, Log, producer state, the
cleaner and LogManager.

Layered as Kafka layers it (see docs/design.md): LocalLog holds the ordered
segments, Log (UnifiedLog's role) adds offsets, producer state, recovery and retention.
Batches are stored and served as opaque bytes, only their 61-byte headers are ever
decoded; a fetch gets a SegmentSlice that pins its segment until released.
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
from logserver.log.local_log import LocalLog, SegmentsChangedError
from logserver.log.log import Log
from logserver.log.manager import LogManager, TopicInfo
from logserver.log.producer_state import Decision, ProducerStateManager, Verdict
from logserver.log.segment import Segment
from logserver.log.slice import SegmentSlice
from logserver.log.worker import StorageWorker

__all__ = [
    "Decision",
    "IndexFullError",
    "InvalidTopicError",
    "Log",
    "LocalLog",
    "LogConfig",
    "LogDirLockedError",
    "LogError",
    "LogManager",
    "OffsetOutOfRangeError",
    "ProducerStateManager",
    "Segment",
    "SegmentSlice",
    "SegmentsChangedError",
    "StorageWorker",
    "TopicExistsError",
    "TopicInfo",
    "UnknownTopicOrPartitionError",
    "Verdict",
]
