"""The control plane interface the handlers of Metadata, CreateTopics, DeleteTopics,
CreatePartitions, FindCoordinator, DescribeCluster, the reassignment APIs and the
cluster-wide configs call.

Built as ``logserver.partition_routing`` is: the handlers in ``logserver/handlers/`` do
ACLs, validation, auto-creation policy and response building once; only this narrow
object differs between a single node (``logserver.control.local.LocalControlPlane``: this
broker is the cluster, its storage the catalog) and a cluster member
(``logserver.cluster.control.EtcdControlPlane``: the catalog and every change in etcd).
Changes raise ``ControlError`` with the Kafka error code the client gets.
"""

from __future__ import annotations

from collections.abc import Awaitable, Collection, Mapping
from dataclasses import dataclass
from typing import Protocol

from logserver.security.scram_admin import Alteration, UserResult
from logserver.topic_config import TopicConfig

__all__ = ["BrokerAddress", "ControlError", "ControlPlane", "Coordinator", "PartitionView",
           "replicas_error"]


class ControlError(Exception):
    """A change the control plane refused or could not make: ``error`` is the Kafka error
    code the client gets, the message its error message."""

    def __init__(self, error: int, message: str) -> None:
        super().__init__(message)
        self.error = error


@dataclass(frozen=True)
class BrokerAddress:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class PartitionView:
    """One partition as Metadata describes it (``leader`` -1: none)."""

    index: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]


@dataclass(frozen=True)
class Coordinator:
    """FindCoordinator's answer for one key: ``address`` is set when ``error`` is NONE."""

    error: int
    message: str | None
    address: BrokerAddress | None


def replicas_error(replicas: list[int], brokers: Collection[int]) -> str | None:
    """Kafka's checks of a target replica list (null, a cancel, is not checked here)."""
    if not replicas:
        return "The replica list cannot be empty."
    if len(set(replicas)) != len(replicas):
        return f"The replica list {replicas} contains duplicates."
    unknown = [b for b in replicas if b not in brokers]
    if unknown:
        return f"The replica list {replicas} names unknown broker(s) {unknown}."
    return None


class ControlPlane(Protocol):
    # -- the cluster --------------------------------------------------------------------

    def caught_up(self) -> Awaitable[None] | None:
        """None when this broker knows the cluster's state; else what completes when it
        does (bounded): a joining broker has no brokers or topics to name yet."""
        ...

    def brokers(self) -> list[BrokerAddress]:
        """The brokers Metadata lists, at their address on the current request's
        listener, by node id."""
        ...

    def members(self) -> list[BrokerAddress]:
        """The brokers DescribeCluster lists, by node id."""
        ...

    def broker_ids(self) -> Collection[int]:
        """The registered brokers replicas may be assigned to."""
        ...

    def controller_id(self) -> int:
        ...

    def cluster_id(self) -> str:
        ...

    # -- the topic catalog --------------------------------------------------------------

    def topic_names(self) -> list[str]:
        ...

    def partition_count(self, topic: str) -> int | None:
        ...

    def topic_id(self, topic: str) -> bytes | None:
        ...

    def topic_for_id(self, topic_id: bytes) -> str | None:
        ...

    def partitions(self, topic: str) -> list[PartitionView]:
        ...

    def replication_factor(self, topic: str) -> int:
        """The replica count of the topic's partitions (new ones get as many)."""
        ...

    def topic_view(self, topic: str) -> tuple[TopicConfig, Mapping[str, str]] | None:
        """The topic's resolved config and overrides (None: no such topic)."""
        ...

    # -- topics -------------------------------------------------------------------------

    def default_replication_factor(self) -> int:
        """What a CreateTopics without a replication factor (-1) gets."""
        ...

    def topic_limit_error(self, partitions: int) -> str | None:
        """Why one more topic of ``partitions`` would break max.topics / max.partitions."""
        ...

    def partition_limit_error(self, added: int) -> str | None:
        """Why ``added`` more partitions would break max.partitions."""
        ...

    def may_auto_create(self, topic: str) -> bool:
        """May a Metadata request create this (valid, missing) topic?"""
        ...

    async def auto_create_topic(self, topic: str) -> int:
        """Create a topic a Metadata request named: the error code for it (NONE: it
        exists now)."""
        ...

    async def create_topic(self, topic: str, partitions: int, replication_factor: int,
                           overrides: Mapping[str, str],
                           assignment: list[tuple[int, ...]] | None,
                           timeout_ms: int) -> bytes:
        """Create the topic (replicas by partition when ``assignment`` is given); its
        id, once this broker's catalog has it. Raises ControlError."""
        ...

    async def delete_topic(self, topic: str) -> bytes:
        """Delete the topic; its id. Raises ControlError."""
        ...

    async def add_partitions(self, topic: str, count: int,
                             assignment: list[tuple[int, ...]] | None) -> None:
        """Grow the topic to ``count`` partitions. Raises ControlError."""
        ...

    # -- coordinators and reassignments -------------------------------------------------

    async def find_coordinator(self, key_type: int, key: str) -> Coordinator:
        ...

    async def reassign(self, topic: str, partition: int,
                       replicas: list[int] | None) -> tuple[int, str | None]:
        """Start moving the partition to ``replicas`` (None: cancel the move under way):
        (error code, message)."""
        ...

    def ongoing_reassignments(self, wanted: list[tuple[str, int]] | None
                              ) -> list[tuple[str, int, list[int], list[int], list[int]]]:
        """(topic, partition, replicas, adding, removing) of each move under way among
        ``wanted`` (None: all partitions)."""
        ...

    # -- cluster-wide settings ----------------------------------------------------------

    async def alter_topic_configs(self, topic: str, overrides: Mapping[str, str]) -> None:
        """Replace the topic's overrides. Raises UnknownTopicOrPartitionError,
        InvalidConfigError, MetadataUnavailableError, OSError."""
        ...

    def wanted_broker_defaults(self) -> Mapping[str, str] | None:
        """The cluster-wide dynamic broker defaults as decided (maybe newer than this
        broker's applied ones); None: this broker's are the ones."""
        ...

    async def alter_broker_defaults(self, level: Mapping[str, str]) -> bool:
        """Store the cluster-wide dynamic broker defaults where every broker finds them;
        False when they are this broker's own (the caller stores them locally)."""
        ...

    async def alter_scram(self, alterations: list[Alteration]) -> list[UserResult]:
        """Apply SCRAM credential changes, durably, where every broker finds them."""
        ...
