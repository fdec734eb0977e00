"""The control plane of a single node: this broker is the one broker and controller,
leads every partition at leader epoch 0, coordinates every group and transactional id,
and its storage is the topic catalog (creations and deletions run on its worker)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Collection, Mapping
from typing import TYPE_CHECKING

from kafkaproto import ErrorCode
from logserver.control.api import (
    BrokerAddress,
    ControlError,
    Coordinator,
    PartitionView,
    replicas_error,
)
from logserver.internal_topics import OFFSETS_TOPIC, TRANSACTION_KEY_TYPE
from logserver.limits import PolicyViolationError
from logserver.partition import LEADER_EPOCH
from logserver.security.scram_admin import Alteration, UserResult, alter
from logserver.storage.api import (
    InvalidConfigError,
    InvalidTopicError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from logserver.topic_config import TopicConfig

if TYPE_CHECKING:
    from logserver.services import BrokerServices

__all__ = ["LocalControlPlane"]

log = logging.getLogger(__name__)



class LocalControlPlane:
    def __init__(self, broker: BrokerServices) -> None:
        self._broker = broker

    @property
    def _node(self) -> int:
        return self._broker.node_id

    def _me(self) -> BrokerAddress:
        host, port = self._broker.advertised_address
        return BrokerAddress(self._node, host, port, None)

    # -- the cluster --------------------------------------------------------------------

    def caught_up(self) -> Awaitable[None] | None:
        return None

    def brokers(self) -> list[BrokerAddress]:
        return [self._me()]

    def members(self) -> list[BrokerAddress]:
        return [self._me()]

    def broker_ids(self) -> Collection[int]:
        return [self._node]

    def controller_id(self) -> int:
        return self._node

    def cluster_id(self) -> str:
        return self._broker.cluster_id

    # -- the topic catalog --------------------------------------------------------------

    def topic_names(self) -> list[str]:
        return self._broker.storage.topic_names()

    def partition_count(self, topic: str) -> int | None:
        return self._broker.storage.partition_count(topic)

    def topic_id(self, topic: str) -> bytes | None:
        return self._broker.storage.topic_id(topic)

    def topic_for_id(self, topic_id: bytes) -> str | None:
        return self._broker.storage.topic_for_id(topic_id)

    def partitions(self, topic: str) -> list[PartitionView]:
        node = self._node
        return [PartitionView(index, node, LEADER_EPOCH, [node], [node], [])
                for index in range(self.partition_count(topic) or 0)]

    def replication_factor(self, topic: str) -> int:
        return 1

    def topic_view(self, topic: str) -> tuple[TopicConfig, Mapping[str, str]] | None:
        storage = self._broker.storage
        config, overrides = storage.topic_config(topic), storage.topic_overrides(topic)
        return None if config is None or overrides is None else (config, overrides)

    # -- topics -------------------------------------------------------------------------

    def default_replication_factor(self) -> int:
        return 1  # one broker: default.replication.factor is for cluster mode

    def topic_limit_error(self, partitions: int) -> str | None:
        return self._broker.topic_limit_error(partitions)

    def partition_limit_error(self, added: int) -> str | None:
        storage = self._broker.storage
        held = sum(storage.partition_count(n) or 0 for n in storage.topic_names())
        limit = self._broker.config["max.partitions"]
        if held + added > limit:
            return (f"the broker holds {held} partitions; {added} more would exceed "
                    f"max.partitions {limit}")
        return None

    def may_auto_create(self, topic: str) -> bool:
        return True  # __consumer_offsets too: created with its own settings (below)

    async def auto_create_topic(self, topic: str) -> int:
        broker = self._broker
        if topic == OFFSETS_TOPIC:  # created with its own settings, as Kafka does
            error = await broker.groups.ensure_offsets_topic()
            return ErrorCode.LEADER_NOT_AVAILABLE if error is not None else ErrorCode.NONE
        partitions = broker.config["num.partitions"]
        if broker.topic_limit_error(partitions) is not None:
            return ErrorCode.POLICY_VIOLATION
        try:
            await broker.create_topic(topic, partitions, {})
        except TopicExistsError:  # another request is creating it right now
            return ErrorCode.NONE if broker.storage.partition_count(topic) is not None \
                else ErrorCode.LEADER_NOT_AVAILABLE
        except Exception as exc:  # disk full, the limits, ...: the client may retry
            log.error("auto-creating topic %s failed: %s", topic, exc)
            return ErrorCode.LEADER_NOT_AVAILABLE
        return ErrorCode.NONE

    async def create_topic(self, topic: str, partitions: int, replication_factor: int,
                           overrides: Mapping[str, str],
                           assignment: list[tuple[int, ...]] | None,
                           timeout_ms: int) -> bytes:
        try:
            return await self._broker.create_topic(topic, partitions, overrides)
        except TopicExistsError as exc:  # lost a race with a concurrent creation
            raise ControlError(ErrorCode.TOPIC_ALREADY_EXISTS, str(exc)) from None
        except PolicyViolationError as exc:
            raise ControlError(ErrorCode.POLICY_VIOLATION, str(exc)) from None
        except InvalidTopicError as exc:
            raise ControlError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc)) from None
        except InvalidConfigError as exc:
            raise ControlError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        except OSError as exc:
            log.error("creating topic %s failed: %s", topic, exc)
            raise ControlError(ErrorCode.KAFKA_STORAGE_ERROR,
                               f"creating the topic failed: {exc}") from None

    async def delete_topic(self, topic: str) -> bytes:
        try:
            return await self._broker.delete_topic(topic)
        except UnknownTopicOrPartitionError:  # a concurrent request deleted it first
            raise ControlError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                               f"topic {topic!r} does not exist") from None
        except OSError as exc:
            log.error("deleting topic %s failed: %s", topic, exc)
            raise ControlError(ErrorCode.KAFKA_STORAGE_ERROR,
                               f"deleting the topic failed: {exc}") from None

    async def add_partitions(self, topic: str, count: int,
                             assignment: list[tuple[int, ...]] | None) -> None:
        try:
            await self._broker.storage.add_partitions(topic, count)
        except UnknownTopicOrPartitionError as exc:  # deleted meanwhile
            raise ControlError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, str(exc)) from None
        except InvalidTopicError as exc:  # a concurrent request grew it first
            raise ControlError(ErrorCode.INVALID_PARTITIONS, str(exc)) from None
        except OSError as exc:
            log.error("adding partitions to %s failed: %s", topic, exc)
            raise ControlError(ErrorCode.KAFKA_STORAGE_ERROR,
                               f"adding partitions failed: {exc}") from None

    # -- coordinators and reassignments -------------------------------------------------

    async def find_coordinator(self, key_type: int, key: str) -> Coordinator:
        broker = self._broker
        if key_type == TRANSACTION_KEY_TYPE:  # the transaction coordinator
            error, message = await broker.transactions.find_coordinator()
        else:
            error, message = await broker.groups.find_coordinator(key_type)
        return Coordinator(error, message, self._me() if error == ErrorCode.NONE else None)

    async def reassign(self, topic: str, partition: int,
                       replicas: list[int] | None) -> tuple[int, str | None]:
        """One node holds every replica: the only valid target is this node itself, so
        the move is done at once and nothing is ever under way."""
        count = self.partition_count(topic)
        if count is None or not 0 <= partition < count:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
        if replicas is None:
            return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No reassignment is in progress."
        bad = replicas_error(replicas, [self._node])
        if bad is not None:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, bad
        return ErrorCode.NONE, None  # already where it should be

    def ongoing_reassignments(self, wanted: list[tuple[str, int]] | None
                              ) -> list[tuple[str, int, list[int], list[int], list[int]]]:
        return []

    # -- cluster-wide settings ----------------------------------------------------------

    async def alter_topic_configs(self, topic: str, overrides: Mapping[str, str]) -> None:
        await self._broker.storage.alter_topic_config(topic, overrides)

    def wanted_broker_defaults(self) -> Mapping[str, str] | None:
        return None

    async def alter_broker_defaults(self, level: Mapping[str, str]) -> bool:
        return False

    async def alter_scram(self, alterations: list[Alteration]) -> list[UserResult]:
        scram = self._broker.scram
        results = alter(scram, alterations)
        if any(r.error_code == 0 for r in results):  # durable before the answer
            await asyncio.to_thread(scram.save, scram.snapshot())
        return results
