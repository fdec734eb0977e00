"""The per-partition sorting OffsetCommit and TxnOffsetCommit share: which partitions of a
request are refused (the group's or the topic's ACL), which are unknown, and which carry
an offset to store."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from kafkaproto import ErrorCode
from logserver.security import checks

if TYPE_CHECKING:
    from logserver.services import BrokerServices

__all__ = ["TopicPartition", "sort_partitions"]

TopicPartition = tuple[str, int]
_P = TypeVar("_P", bound="_RequestPartition")
_P_co = TypeVar("_P_co", bound="_RequestPartition", covariant=True)
_O = TypeVar("_O")


class _RequestPartition(Protocol):
    @property
    def partition_index(self) -> int: ...


class _RequestTopic(Protocol[_P_co]):
    @property
    def name(self) -> str: ...

    @property
    def partitions(self) -> Sequence[_P_co]: ...


def sort_partitions(
    broker: BrokerServices, topics: Sequence[_RequestTopic[_P]], refused: int,
    topic_rule: checks.Rule, offset_of: Callable[[_P], _O],
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, _O]]:
    """(errors, offsets): ``refused`` (the group's or transactional id's refusal, or
    NONE) fails every partition, else ``topic_rule`` is checked per topic; partitions the
    topic does not have get UNKNOWN_TOPIC_OR_PARTITION; the rest map to ``offset_of``."""
    errors: dict[TopicPartition, int] = {}
    offsets: dict[TopicPartition, _O] = {}
    for topic in topics:
        count = broker.topics.partition_count(topic.name)
        topic_refused = refused or checks.denied(broker, topic_rule, topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if topic_refused:
                errors[tp] = topic_refused
            elif count is None or not 0 <= p.partition_index < count:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                offsets[tp] = offset_of(p)
    return errors, offsets
