"""``log.file.handles.max`` within the descriptor limit, so the server always starts on
what it created, whatever the number of partitions.

Segment files are opened through a bounded file-handle cache (logserver.log.file_cache):
partitions hold no descriptors of their own (an empty one none at all), so the
partition count is no longer bounded by ``ulimit -n`` (it was: 5 descriptors per
partition). At start-up the soft ``RLIMIT_NOFILE`` is raised to the hard one (as a
service manager's ``LimitNOFILE`` would), ``reserved`` descriptors are kept for
connections, the data-directory lock, checkpoints and the like, and the cache gets at
most the rest.
"""

from __future__ import annotations

import logging
import resource

__all__ = ["file_handles_allowed", "raise_nofile_limit", "reserved"]

log = logging.getLogger(__name__)

_RESERVED_MIN = 128
_NO_LIMIT_CAP = 1 << 20  # what an unlimited hard limit is taken to be


def raise_nofile_limit() -> int:
    """Raise the soft descriptor limit to the hard one; returns the soft limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = _NO_LIMIT_CAP if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.warning("could not raise the descriptor limit from %d to %d: %s", soft, target, exc)
    return _NO_LIMIT_CAP if soft == resource.RLIM_INFINITY else soft


def reserved(nofile: int) -> int:
    """Descriptors kept for everything but partitions: connections above all."""
    return _RESERVED_MIN + nofile // 8


def file_handles_allowed(nofile: int) -> int:
    """Most descriptors the segment file cache may hold within ``nofile`` beside the
    reserve (at least a few segments' worth, so a tiny limit still serves)."""
    return max(16, nofile - reserved(nofile))
