"""Bridge-wide counters, shared by the components (per-connection ones live on each
Connection); the admin API and the periodic stats line read them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Stats:
    """Bridge-wide counters (per-connection ones live on each Connection)."""

    connections_total: int = 0
    refused: int = 0
    protocol_errors: int = 0
    msgs_in: int = 0
    msgs_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    uplink_records: int = 0
    local_routed: int = 0
    downlink_records: int = 0
    downlink_unroutable: int = 0
    denied_connect: int = 0
    denied_publish: int = 0
    denied_subscribe: int = 0
    session_save_failures: int = 0
    refused_sessions: int = 0  # CONNECTs refused: max_sessions reached
    retained_refused: int = 0  # retained messages not kept: max_retained_messages/_bytes
    queued_dropped: int = 0  # outgoing messages dropped from full queues (of ended sessions)
    early_overflows: int = 0  # connections closed: over max_packets/bytes_before_connack
    topic_levels_refused: int = 0  # PUBLISH topics / SUBSCRIBE filters over max_topic_levels
    sessions_taken_over: int = 0  # sessions handed to another bridge that the client moved to
