"""``max.partitions`` from the descriptor limit, so the server always starts on what it
created.

A partition holds 3 descriptors while idle (its active segment's ``.log`` and two index
files; older segments close theirs, see ``logserver.log.segment``) and 5 once its
indexes are read. At start-up the soft ``RLIMIT_NOFILE`` is raised to the hard one (as
a service manager's ``LimitNOFILE`` would), ``RESERVED`` descriptors are kept for
connections, the data-directory lock, checkpoints and the like, and the rest divided
by 5 bounds ``max.partitions``: a creation beyond it is refused with POLICY_VIOLATION
instead of exhausting the descriptors and leaving a data directory that no longer
starts.
"""

from __future__ import annotations

import logging
import resource

__all__ = ["FDS_PER_PARTITION", "partitions_allowed", "raise_nofile_limit"]

log = logging.getLogger(__name__)

FDS_PER_PARTITION = 5
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


def partitions_allowed(nofile: int) -> int:
    """Most partitions whose files fit in ``nofile`` descriptors beside the reserve."""
    return max(1, (nofile - reserved(nofile)) // FDS_PER_PARTITION)
