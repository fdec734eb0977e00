"""What the broker's components and request handlers reach through the broker: its
settings, storage, partition routing, control plane, group and transaction
coordinators, security stores and identity.

``logserver.broker.Broker`` (the composition root) builds these and implements this
Protocol; everything below it names ``BrokerServices`` rather than ``Broker``, so no
module imports the composition root and the layering has no import cycle
(tests/unit/test_import_cycles.py). The cluster node is not part of it: what handlers
ask of the cluster goes through ``routing`` (data path) and ``control`` (metadata and
admin), whose cluster-mode implementations hold the node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections import Counter

    from commonlib.source_limits import LoginBackoff
    from logserver.clock import Clock
    from logserver.cluster.peer_links import PeerConnections
    from logserver.config import Config
    from logserver.control.api import ControlPlane
    from logserver.groups.consumer.machine import TopicCatalog
    from logserver.groups.coordinator import GroupCoordinator
    from logserver.partition_routing import PartitionRouting
    from logserver.security.authorizer import Authorizer
    from logserver.security.credentials import CredentialStore
    from logserver.security.store import AclStore
    from logserver.storage.api import Storage, StorageEngine
    from logserver.transactions.coordinator import TransactionCoordinator

__all__ = ["BrokerServices"]


class BrokerServices(Protocol):
    """The services of one broker (see the module docstring)."""

    config: Config
    clock: Clock  # the one clock (logserver/clock.py)
    node_id: int
    storage: Storage
    engine: StorageEngine  # the replica-log side of the same engine (storage/api.py)
    topics: TopicCatalog
    routing: PartitionRouting
    control: ControlPlane
    groups: GroupCoordinator
    transactions: TransactionCoordinator
    authorizer: Authorizer | None
    acl_store: AclStore | None
    scram: CredentialStore
    login_backoff: LoginBackoff
    sasl_failures: Counter[str]
    peers: PeerConnections
    admin_address: tuple[str, int] | None
    cluster_id: str

    @property
    def advertised_address(self) -> tuple[str, int]: ...

    async def allocate_producer_id(self) -> int: ...

    def topic_limit_error(self, new_partitions: int) -> str | None: ...

    async def create_topic(self, name: str, partitions: int,
                           overrides: Mapping[str, str]) -> bytes: ...

    async def delete_topic(self, name: str) -> bytes: ...
