"""The error a cluster-wide change reports when etcd cannot take it.

Handlers answer it with REQUEST_TIMED_OUT (as Kafka does when its controller does not
answer) instead of dropping the connection; the change may or may not have landed, as
with any timeout.
"""

from __future__ import annotations

__all__ = ["MetadataUnavailableError", "etcd_client_missing", "etcd_failures"]


class MetadataUnavailableError(Exception):
    """etcd did not take a cluster-wide change (unreachable, or failed)."""


def etcd_failures() -> tuple[type[BaseException], ...]:
    """The exceptions of a failed etcd call (aetcd's, and ConnectionError when its
    reconnect fails). Imported on first failure, not at start, so a single-node server
    runs without the ``cluster`` extra (aetcd) installed."""
    import aetcd

    return (aetcd.ClientError, ConnectionError)


def etcd_client_missing() -> str | None:
    """Why cluster mode cannot start here (one line), or None: the etcd client is the
    optional ``cluster`` extra, which the README's run command does not install."""
    try:
        import aetcd  # noqa: F401
    except ImportError:
        return ("cluster mode needs the etcd client aetcd: bash contrib/venv.sh cluster "
                "(or pip install 'logserver[cluster]')")
    return None
