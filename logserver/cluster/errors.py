"""The error a cluster-wide change reports when etcd cannot take it.

Handlers answer it with REQUEST_TIMED_OUT (as Kafka does when its controller does not
answer) instead of dropping the connection; the change may or may not have landed, as
with any timeout.
"""

from __future__ import annotations

__all__ = ["MetadataUnavailableError"]


class MetadataUnavailableError(Exception):
    """etcd did not take a cluster-wide change (unreachable, or failed)."""
