"""The control plane of a cluster member (``logserver.control.api.ControlPlane``): the
brokers, topics and partition states from the ClusterModel this broker's etcd watch
keeps; every change an etcd transaction (a compare-and-swap where it must not race),
answered once this broker's own watch has seen it, so the client's next request to this
broker finds it.

A group's coordinator is the leader of its ``__consumer_offsets`` partition (Kafka's
``Utils.abs(groupId.hashCode) % partitions``), a transactional id's the leader of its
``__transaction_state`` partition, whichever broker is asked: their members never split
between brokers, and a new leader has the replicated state. A reassignment starts with a
compare-and-swap of the partition state (reassignment.py); the controller finishes it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode
from kafkaproto.client import Failures
from logserver.broker_overrides import Overlay
from logserver.cluster import reassignment
from logserver.cluster.etcd import ETCD_BACKOFF
from logserver.cluster.model import PartitionState
from logserver.cluster.node import TopicCreationError
from logserver.cluster.topic_configs import alter_topic_configs
from logserver.control.api import (
    BrokerAddress,
    ControlError,
    Coordinator,
    PartitionView,
    replicas_error,
)
from logserver.internal_topics import (
    GROUP_KEY_TYPE,
    INTERNAL_TOPICS,
    OFFSETS_TOPIC,
    TRANSACTION_KEY_TYPE,
    TXN_STATE_TOPIC,
    kafka_partition_for,
)
from logserver.request_context import listener_name
from logserver.security.scram_admin import Alteration, UserResult
from logserver.topic_config import TopicConfig, kept_overrides

if TYPE_CHECKING:
    from logserver.cluster.node import ClusterNode
    from logserver.services import BrokerServices

__all__ = ["EtcdControlPlane"]

log = logging.getLogger(__name__)

VISIBLE_TIMEOUT_S = 5.0  # a change is answered once our own watch has it (bounded)
JOINING_TIMEOUT_S = 10.0  # a Metadata answer waits this long for a joining broker's state
CAS_ATTEMPTS = 5


class EtcdControlPlane:
    def __init__(self, broker: BrokerServices, node: ClusterNode) -> None:
        self._broker = broker
        self._node = node

    async def _until(self, done: Callable[[], bool], timeout_s: float = VISIBLE_TIMEOUT_S) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not done() and loop.time() < deadline:
            await asyncio.sleep(0.01)

    # -- the cluster --------------------------------------------------------------------

    def caught_up(self) -> Awaitable[None] | None:
        """A broker still joining (its listener is open while it registers and reads the
        cluster's state): as Kafka serves requests only once its metadata has caught up,
        the answer waits for that (bounded)."""
        if self._node.ready.is_set():
            return None
        return self._joined()

    async def _joined(self) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._node.ready.wait(), JOINING_TIMEOUT_S)

    def brokers(self) -> list[BrokerAddress]:
        listener = listener_name.get()
        return [BrokerAddress(b.node_id, *b.address(listener), b.rack)
                for b in sorted(self._node.metadata_brokers().values(), key=lambda b: b.node_id)]

    def members(self) -> list[BrokerAddress]:
        return [BrokerAddress(b.node_id, b.host, b.port, b.rack)
                for b in sorted(self._node.model.brokers.values(), key=lambda b: b.node_id)]

    def broker_ids(self) -> Collection[int]:
        return self._node.model.brokers.keys()

    def controller_id(self) -> int:
        controller = self._node.model.controller_id
        return controller if controller is not None else self._node.node_id

    def cluster_id(self) -> str:
        return self._node.model.cluster_id or self._broker.cluster_id

    # -- the topic catalog --------------------------------------------------------------

    def topic_names(self) -> list[str]:
        return sorted(self._node.model.topics)

    def partition_count(self, topic: str) -> int | None:
        record = self._node.model.topics.get(topic)
        return None if record is None else record.partitions

    def topic_id(self, topic: str) -> bytes | None:
        record = self._node.model.topics.get(topic)
        return None if record is None else record.topic_id

    def topic_for_id(self, topic_id: bytes) -> str | None:
        return self._node.model.topic_for_id(topic_id)

    def partitions(self, topic: str) -> list[PartitionView]:
        model = self._node.model
        return [PartitionView(index, state.leader, state.leader_epoch, list(state.replicas), list(state.isr),
                              state.offline_replicas(model.brokers))
                for index, state in model.topic_partitions(topic)]

    def replication_factor(self, topic: str) -> int:
        first = self._node.model.partition(topic, 0)
        return len(first.replicas) if first is not None else 1

    def topic_view(self, topic: str) -> tuple[TopicConfig, Mapping[str, str]] | None:
        """The topic record's (etcd) overrides: also for a topic this broker holds no
        replica of."""
        record = self._node.model.topics.get(topic)
        if record is None:
            return None
        overrides = kept_overrides(record.configs)
        defaults = Overlay(self._broker.config, self._broker.storage.broker_overrides().effective())
        return TopicConfig.from_settings(defaults, overrides), overrides

    # -- topics -------------------------------------------------------------------------

    def default_replication_factor(self) -> int:
        return int(self._broker.config["default.replication.factor"])

    def topic_limit_error(self, partitions: int) -> str | None:
        return None  # max.topics / max.partitions bound one broker's storage

    def partition_limit_error(self, added: int) -> str | None:
        return None

    def may_auto_create(self, topic: str) -> bool:
        return topic not in INTERNAL_TOPICS  # created by FindCoordinator, with their settings

    async def auto_create_topic(self, topic: str) -> int:
        config = self._broker.config
        try:
            await self._create_and_wait(topic, config["num.partitions"],
                                        config["default.replication.factor"], {}, None)
        except TopicCreationError as exc:
            return (ErrorCode.LEADER_NOT_AVAILABLE
                    if exc.error == ErrorCode.TOPIC_ALREADY_EXISTS else exc.error)
        except Exception as exc:  # etcd unreachable: clients ask again
            log.error("auto-creating topic %s in etcd failed: %s", topic, exc)
            return ErrorCode.LEADER_NOT_AVAILABLE
        return ErrorCode.NONE

    async def _create_and_wait(self, topic: str, partitions: int, replication_factor: int,
                               overrides: Mapping[str, str],
                               assignment: list[tuple[int, ...]] | None) -> bytes:
        node = self._node
        record = await node.create_topic(topic, partitions, replication_factor, dict(overrides),
                                         assignment)
        await self._until(lambda: topic in node.model.topics)
        return record.topic_id

    async def create_topic(self, topic: str, partitions: int, replication_factor: int,
                           overrides: Mapping[str, str],
                           assignment: list[tuple[int, ...]] | None,
                           timeout_ms: int) -> bytes:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000
        failures = Failures(ETCD_BACKOFF)
        while True:
            try:
                return await self._create_and_wait(topic, partitions, replication_factor,
                                                   overrides, assignment)
            except TopicCreationError as exc:
                raise ControlError(exc.error, str(exc)) from None
            except Exception as exc:  # etcd unreachable: try again within the request's timeout
                if loop.time() >= deadline:
                    log.error("creating topic %s in etcd failed: %s", topic, exc)
                    raise ControlError(ErrorCode.REQUEST_TIMED_OUT,
                                       f"cluster metadata store: {exc}") from None
                await asyncio.sleep(failures.failed())

    async def delete_topic(self, topic: str) -> bytes:
        node = self._node
        if topic in INTERNAL_TOPICS:
            raise ControlError(ErrorCode.TOPIC_DELETION_DISABLED,
                               f"{topic} is an internal topic of the cluster")
        record = node.model.topics.get(topic)
        try:
            deleted = record is not None and await node.delete_topic(topic)
        except Exception as exc:  # etcd unreachable
            log.error("deleting topic %s in etcd failed: %s", topic, exc)
            raise ControlError(ErrorCode.REQUEST_TIMED_OUT,
                               f"cluster metadata store: {exc}") from None
        if record is None or not deleted:
            raise ControlError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no such topic")
        await self._until(lambda: topic not in node.model.topics)
        return record.topic_id

    async def add_partitions(self, topic: str, count: int,
                             assignment: list[tuple[int, ...]] | None) -> None:
        node = self._node
        try:
            await node.add_partitions(topic, count, assignment)
        except TopicCreationError as exc:
            raise ControlError(exc.error, str(exc)) from None
        except Exception as exc:  # etcd unreachable
            log.error("growing topic %s in etcd failed: %s", topic, exc)
            raise ControlError(ErrorCode.REQUEST_TIMED_OUT,
                               f"cluster metadata store: {exc}") from None
        model = node.model
        await self._until(lambda: (r := model.topics.get(topic)) is not None
                          and r.partitions >= count
                          and all(model.partition(topic, i) is not None for i in range(count)))

    # -- coordinators and reassignments -------------------------------------------------

    async def find_coordinator(self, key_type: int, key: str) -> Coordinator:
        node = self._node
        if key_type not in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE):
            return Coordinator(ErrorCode.INVALID_REQUEST, None, None)
        internal = TXN_STATE_TOPIC if key_type == TRANSACTION_KEY_TYPE else OFFSETS_TOPIC
        if internal not in node.model.topics:  # the first lookup creates it, as Kafka
            try:
                if key_type == TRANSACTION_KEY_TYPE:
                    await node.ensure_txn_state_topic()
                else:
                    await node.ensure_offsets_topic()
            except Exception as exc:  # etcd unreachable: clients retry
                log.warning("creating %s failed: %s", internal, exc)
        record = node.model.topics.get(internal)
        partition = 0 if record is None else kafka_partition_for(key, record.partitions)
        state = node.model.partition(internal, partition)
        info = node.model.brokers.get(state.leader) if state is not None else None
        if info is None:  # not created yet, or no leader now: clients look again
            return Coordinator(ErrorCode.COORDINATOR_NOT_AVAILABLE, None, None)
        host, port = info.address(listener_name.get())  # the listener the client came in on
        return Coordinator(ErrorCode.NONE, None, BrokerAddress(info.node_id, host, port, info.rack))

    async def reassign(self, topic: str, partition: int,
                       replicas: list[int] | None) -> tuple[int, str | None]:
        node = self._node
        key = node.keys.partition(topic, partition)
        target = None if replicas is None else tuple(replicas)
        if topic in INTERNAL_TOPICS:  # its group coordinator follows leadership, not moves (yet)
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"{topic} cannot be reassigned in this version")
        if target is not None:
            bad = replicas_error(list(target), node.model.brokers)
            if bad is not None:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, bad
        try:
            for _ in range(CAS_ATTEMPTS):  # lost a race with an ISR or leader change: read again
                found = await node.store.get(key)
                if found is None or topic not in node.model.topics:
                    return (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            "This server does not host this topic-partition.")
                state = PartitionState.decode(found[0])
                if target is None:
                    if not reassignment.reassigning(state):
                        return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No reassignment is in progress."
                    try:
                        new = reassignment.cancel(state)
                    except ValueError as exc:
                        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"cannot cancel: {exc}"
                else:
                    new = reassignment.begin(state, target)
                if new == state:
                    return ErrorCode.NONE, None
                if await node.store.swap(key, new.encode(), found[1]):
                    log.info("%s-%d: %s, replicas %s -> %s (adding %s, removing %s)", topic,
                             partition, "reassignment cancelled" if target is None
                             else "reassigning", list(state.replicas), list(new.replicas),
                             list(new.adding), list(new.removing))
                    return ErrorCode.NONE, None
        except Exception as exc:  # etcd unreachable
            log.error("reassigning %s-%d in etcd failed: %s", topic, partition, exc)
            return ErrorCode.REQUEST_TIMED_OUT, f"cluster metadata store: {exc}"
        return ErrorCode.REQUEST_TIMED_OUT, "the partition kept changing; try again"

    def ongoing_reassignments(self, wanted: list[tuple[str, int]] | None
                              ) -> list[tuple[str, int, list[int], list[int], list[int]]]:
        model = self._node.model
        ongoing = []
        for topic, index in sorted(model.partitions) if wanted is None else wanted:
            state = model.partition(topic, index)
            if state is not None and reassignment.reassigning(state):
                ongoing.append((topic, index, list(state.replicas), list(state.adding),
                                list(state.removing)))
        return ongoing

    # -- cluster-wide settings ----------------------------------------------------------

    async def alter_topic_configs(self, topic: str, overrides: Mapping[str, str]) -> None:
        await alter_topic_configs(self._node, topic, overrides)  # every broker applies it

    def wanted_broker_defaults(self) -> Mapping[str, str] | None:
        return self._node.broker_defaults.wanted

    async def alter_broker_defaults(self, level: Mapping[str, str]) -> bool:
        await self._node.broker_defaults.alter(dict(level))
        return True

    async def alter_scram(self, alterations: list[Alteration]) -> list[UserResult]:
        return await self._node.security.alter_scram(alterations)
