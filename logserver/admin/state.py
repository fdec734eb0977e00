"""What the admin listener reads: the broker, the connections, and whether it is ready."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from logserver.cluster_access import WithCluster
    from logserver.network import ConnectionStats


@dataclass
class AdminState:
    """Filled in by the server as start-up proceeds; the views read it, never write it.

    ``broker`` is None until the data directory is open (recovery runs off the loop in
    the meantime, so /v1/status/live answers while /v1/status/ready says false).
    """

    stats: ConnectionStats
    broker: WithCluster | None = None
    serving: bool = False  # the Kafka listeners are bound and the broker started
    stopping: bool = False
    started_at: float = field(default=0.0)
    #: the --mqtt-bridge child's admin API, read by the dashboard for its devices
    bridge_admin_url: str | None = None

    @property
    def ready(self) -> bool:
        broker = self.broker
        return (broker is not None and self.serving and not self.stopping
                and not broker.groups.loading)
