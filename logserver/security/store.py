"""ACLs on disk: one JSON file in the data directory, replaced atomically on each change.

Why a file and not a compacted internal topic: ACL changes are rare and small, a
CreateAcls or DeleteAcls batch must become visible all at once or not at all, and the
authorizer must know every ACL before the first request is served. One atomic
replace (write, fsync, rename, fsync the directory) gives exactly that, needs no replay
at start-up, works the same under either storage engine, and leaves an operator a
readable file to inspect. A topic would add ordering with the storage start-up and a
compaction story for no gain on one node.

Changes are serialised: each one is planned against the current set, written on a worker
thread (the event loop keeps serving), and only then installed in the authorizer.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from logserver.log.fsutil import atomic_write
from logserver.security.acl import AclBinding
from logserver.security.authorizer import Authorizer

__all__ = ["ACL_FILE", "AclFileError", "AclStore", "decode_acls", "encode_acls", "read_acls"]

log = logging.getLogger(__name__)

ACL_FILE = "acls.json"
_FORMAT_VERSION = 1
R = TypeVar("R")


class AclFileError(ValueError):
    """The ACL file cannot be read: the server refuses to start (exit code 1)."""


def read_acls(path: Path) -> frozenset[AclBinding]:
    """The ACLs stored at ``path`` (none when it does not exist). A damaged file stops
    start-up: serving with fewer ACLs than the operator set could open or close access."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return frozenset()
    try:
        return decode_acls(text.encode())
    except ValueError as exc:
        raise AclFileError(f"{path}: cannot read the ACLs: {exc} (fix or remove the file; "
                           "without it the server starts with no ACLs)") from exc


def decode_acls(raw: bytes) -> frozenset[AclBinding]:
    """The ACL set of a document written by :func:`encode_acls` (ValueError if damaged);
    the same document is the cluster-wide ACL set in etcd (logserver/cluster)."""
    try:
        data = json.loads(raw)
        if data.get("version") != _FORMAT_VERSION:
            raise ValueError(f"unknown format version {data.get('version')!r}")
        return frozenset(AclBinding.from_json(item) for item in data["acls"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(str(exc)) from exc


def encode_acls(acls: frozenset[AclBinding]) -> bytes:
    document = {"version": _FORMAT_VERSION, "acls": [acl.to_json() for acl in sorted(acls)]}
    return (json.dumps(document, indent=1) + "\n").encode()


class AclStore:
    """The authorizer's ACL set and its file; the only way ACLs change."""

    def __init__(self, authorizer: Authorizer, path: Path) -> None:
        self.authorizer = authorizer
        self.path = path
        self._lock = asyncio.Lock()

    def load(self) -> None:
        acls = read_acls(self.path)
        self.authorizer.replace(acls)
        log.info("authorizer: %d ACLs from %s; super users: %s; allow.everyone.if.no.acl.found=%s",
                 len(acls), self.path, ", ".join(sorted(self.authorizer.super_users)) or "none",
                 str(self.authorizer.allow_if_no_acl).lower())

    async def update(self, plan: Callable[[Authorizer], tuple[frozenset[AclBinding], R]]) -> R:
        """Apply ``plan`` (current authorizer -> new ACL set, result) durably; return the result."""
        async with self._lock:
            acls, result = plan(self.authorizer)
            if acls != self.authorizer.acls:
                await asyncio.to_thread(atomic_write, self.path, encode_acls(acls))
                self.authorizer.replace(acls)
                log.info("ACLs changed: %d now (%s)", len(acls), self.path)
            return result
