"""The composition root: settings, the storage engine, the group coordinator, and the
broker-wide policies that span them (topic limits, offsets of deleted topics)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING

from commonlib.source_limits import LoginBackoff
from logserver.clock import SYSTEM_CLOCK, Clock
from logserver.cluster.peer_links import PeerConnections
from logserver.config import Config
from logserver.control.api import ControlPlane
from logserver.control.local import LocalControlPlane
from logserver.groups import GroupCoordinator
from logserver.groups.consumer.machine import TopicCatalog
from logserver.limits import PolicyViolationError, topic_limit_error
from logserver.partition import LEADER_EPOCH
from logserver.partition_routing import LocalRouting, PartitionRouting
from logserver.request_context import listener_name
from logserver.security import authorizer_from_settings
from logserver.security.credentials import CredentialStore
from logserver.security.store import ACL_FILE, AclStore
from logserver.storage.api import Storage, StorageEngine
from logserver.transactions import TransactionCoordinator

if TYPE_CHECKING:
    from logserver.cluster.node import ClusterNode

log = logging.getLogger(__name__)

__all__ = ["Broker", "PolicyViolationError"]


class Broker:
    leader_epoch = LEADER_EPOCH

    def __init__(self, config: Config, storage: StorageEngine | None = None) -> None:
        self.config = config
        self.clock: Clock = SYSTEM_CLOCK  # the one clock components read (clock.py)
        self.node_id: int = config["node.id"]
        self.data_dir = config.data_dir
        if storage is None:
            from logserver.storage.segment_log import SegmentLogStorage

            storage = SegmentLogStorage(config)
        # Handlers, groups and transactions see the client-facing interface; cluster
        # replication drives the same engine's replica-log side too (storage/api.py).
        self.storage: Storage = storage
        self.engine: StorageEngine = storage
        # Topic names, partition counts and ids as groups and offset commits see them:
        # this broker's logs here, the cluster's (etcd) in cluster mode.
        self.topics: TopicCatalog = storage
        self._creating: dict[str, int] = {}  # topic -> partitions, while being created
        self.groups = GroupCoordinator(self, self.clock)  # consumer groups (logserver/groups)
        # ACL authorization (logserver/security): None unless authorizer.class.name is set.
        self.authorizer = authorizer_from_settings(config)
        self.acl_store = None if self.authorizer is None else AclStore(
            self.authorizer, self.data_dir / ACL_FILE)
        self.scram = CredentialStore(self.data_dir)  # SASL users (logserver/security)
        # failed SASL logins slow down their address's next ones (KIP-306's delay, doubling)
        self.login_backoff = LoginBackoff(
            config["connection.failed.authentication.delay.ms"] / 1000,
            config["connection.failed.authentication.delay.max.ms"] / 1000)
        self.sasl_failures: Counter[str] = Counter()  # per listener, for /metrics
        self.transactions = TransactionCoordinator(self, self.clock)  # KIP-98 (logserver/transactions)
        self.cluster: ClusterNode | None = None  # cluster mode only (logserver/cluster)
        # Connections to the other brokers, for requests this one sends them itself.
        self.peers = PeerConnections()
        # This broker's admin HTTP listener (host, port), registered in cluster mode.
        self.admin_address: tuple[str, int] | None = None
        self._cluster_id: str | None = None  # cluster mode: etcd's (cluster/identity.py)
        # What the data-path handlers ask about leadership and replication.
        self.routing: PartitionRouting = LocalRouting(self.storage)
        # What the metadata and admin handlers ask of the cluster (logserver/control).
        self.control: ControlPlane = LocalControlPlane(self)
        if config["cluster.etcd.endpoints"]:
            from logserver.cluster.control import EtcdControlPlane
            from logserver.cluster.node import ClusterNode
            from logserver.cluster.routing import ClusterRouting
            from logserver.cluster.txn_markers import MarkerSender

            self.cluster = ClusterNode(self)
            if self.acl_store is not None:  # ACLs are cluster-wide, in etcd
                from logserver.cluster.security_sync import EtcdAclStore

                self.acl_store = EtcdAclStore(self.acl_store.authorizer, self.cluster.security,
                                              self.acl_store)
            self.routing = ClusterRouting(self.cluster)
            self.control = EtcdControlPlane(self, self.cluster)
            # the cluster's topic names and ids (etcd), as Metadata and Fetch v13+ name them
            self.topics = self.groups.catalog = self.control
            self.transactions.marker_sender = MarkerSender(self.cluster)

    # -- lifecycle ------------------------------------------------------------------------

    def open(self) -> None:
        if self.acl_store is not None:  # first: a damaged ACL file stops start-up early
            self.acl_store.load()
        self.storage.open()
        self.scram.load()

    async def start(self) -> None:
        await self.storage.start()
        if self.cluster is None:
            self.groups.start()
        else:  # the cluster starts the coordinator where it leads __consumer_offsets
            await self.cluster.start()
        if self.cluster is None:  # the cluster loads __transaction_state partitions it leads
            self.transactions.start()

    async def close(self) -> None:
        await self.transactions.close()
        if self.cluster is not None:
            await self.cluster.close()
        await self.groups.close()
        await self.peers.close()
        await self.storage.close()

    @property
    def cluster_id(self) -> str:
        """The storage's (meta.properties), until cluster mode sets etcd's one."""
        return self._cluster_id if self._cluster_id is not None else self.storage.cluster_id

    @cluster_id.setter
    def cluster_id(self, value: str) -> None:
        self._cluster_id = value

    @property
    def advertised_address(self) -> tuple[str, int]:
        """The advertised address of the listener the current request came in on (as
        Kafka: a client on the SASL_SSL listener is told the SASL_SSL address)."""
        name = listener_name.get()
        advertised = self.config.advertised
        listener = next((li for li in advertised if li.name == name), advertised[0])
        return listener.host, listener.port

    async def allocate_producer_id(self) -> int:
        """A producer id nobody else has: from cluster-wide blocks in cluster mode."""
        if self.cluster is not None:
            return await self.cluster.allocate_producer_id()
        return await self.storage.allocate_producer_id()

    # -- topics ---------------------------------------------------------------------------

    def topic_limit_error(self, new_partitions: int) -> str | None:
        """Why one more topic of ``new_partitions`` would break max.topics / max.partitions
        (topics still being created count)."""
        names = self.storage.topic_names()
        topics = len(names) + len(self._creating)
        partitions = sum(self.storage.partition_count(n) or 0 for n in names) + sum(
            self._creating.values())
        return topic_limit_error(self.config, topics, partitions, new_partitions)

    async def create_topic(self, name: str, partitions: int, overrides: Mapping[str, str]) -> bytes:
        """Create a topic within the broker's limits; returns its id. Raises
        PolicyViolationError and whatever ``Storage.create_topic`` raises."""
        limit = self.topic_limit_error(partitions)
        if limit is not None:
            raise PolicyViolationError(limit)
        counted = name not in self._creating
        if counted:
            self._creating[name] = partitions
        try:
            return await self.storage.create_topic(name, partitions, overrides)
        finally:
            if counted:
                self._creating.pop(name, None)

    async def delete_topic(self, name: str) -> bytes:
        """Delete a topic and, as Kafka does, the offsets committed for it."""
        topic_id = await self.storage.delete_topic(name)
        await self.groups.on_topic_deleted(name)
        return topic_id
