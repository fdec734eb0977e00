"""Cluster-wide ACLs and SCRAM credentials, kept in etcd as Kafka keeps them in its metadata.

Two keys under the cluster prefix, each one JSON document in the format of the
single-node file it replaces (so a change is one compare-and-swap, all of a CreateAcls or
AlterUserScramCredentials batch or nothing):

- ``{prefix}/acls``: every ACL binding (``logserver.security.store`` format);
- ``{prefix}/scram_credentials``: per user and mechanism salt, iterations, StoredKey and
  ServerKey (RFC 5802), never a password (``logserver.security.credentials`` format).

A write plans against the value read from etcd and swaps it in only if nobody changed it
meanwhile (else it plans again). Every broker's watch applies the key to its own
authorizer / credential store, so the broker asked and all the others converge; a broker
(re)started later gets them from its start-up snapshot. Until the cluster holds a key,
each broker keeps what its data directory had (``acls.json``, ``logserver scram``); the
first cluster-wide change starts from the asking broker's set.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from kafkaproto import ErrorCode
from logserver.cluster.errors import MetadataUnavailableError, etcd_failures
from logserver.security.acl import AclBinding
from logserver.security.authorizer import Authorizer
from logserver.security.credentials import CredentialStore
from logserver.security.scram_admin import Alteration, UserResult, alter
from logserver.security.store import AclStore, decode_acls, encode_acls

if TYPE_CHECKING:
    from logserver.cluster.etcd import EtcdStore

__all__ = ["ClusterSecurity", "EtcdAclStore"]

log = logging.getLogger(__name__)
R = TypeVar("R")
SCRAM_KEY = b"scram_credentials"  # under the prefix (also written by `logserver scram`)


class ClusterSecurity:
    """The two etcd keys and how a watched value reaches this broker's security state."""

    def __init__(self, root: bytes, store: EtcdStore, authorizer: Authorizer | None,
                 credentials: CredentialStore) -> None:
        self.acl_key = root + b"acls"
        self.scram_key = root + SCRAM_KEY
        self.store = store
        self.authorizer = authorizer
        self.credentials = credentials
        self._scram_lock = asyncio.Lock()

    def apply(self, key: bytes, value: bytes | None) -> None:
        """A watched put (a deletion leaves the last state: nothing here deletes them)."""
        if value is None:
            return
        try:
            if key == self.acl_key and self.authorizer is not None:
                acls = decode_acls(value)
                self.authorizer.replace(acls)
                log.info("cluster ACLs applied: %d", len(acls))
            elif key == self.scram_key:
                self.credentials.replace_all(value, "etcd")
                log.info("cluster SCRAM credentials applied: %d users",
                         len(self.credentials.users()))
        except ValueError as exc:  # keep the last good state rather than none
            log.error("ignoring damaged %s in etcd: %s", key.decode(), exc)

    async def alter_scram(self, alterations: list[Alteration]) -> list[UserResult]:
        """AlterUserScramCredentials against the cluster's credentials, by compare-and-swap."""
        async with self._scram_lock:
            try:
                return await self._alter_scram(alterations)
            except etcd_failures() as exc:
                log.warning("AlterUserScramCredentials: etcd failed: %s", exc)
                return [UserResult(user, ErrorCode.REQUEST_TIMED_OUT, f"etcd failed: {exc}")
                        for user in dict.fromkeys(a.user for a in alterations)]

    async def _alter_scram(self, alterations: list[Alteration]) -> list[UserResult]:
        while True:
            found = await self.store.get(self.scram_key)
            working = CredentialStore(self.credentials.path.parent)
            working.replace_all(self.credentials.snapshot()[1] if found is None else found[0])
            results = alter(working, alterations)
            if not any(r.error_code == 0 for r in results):
                return results
            document = working.snapshot()[1]
            if await self.store.swap(self.scram_key, document, 0 if found is None else found[1]):
                self.credentials.replace_all(document, "etcd")
                return results
            log.info("SCRAM credentials changed concurrently; planning again")


class EtcdAclStore(AclStore):
    """The AclStore of a cluster broker: changes go to etcd, not to the local file."""

    def __init__(self, authorizer: Authorizer, security: ClusterSecurity, local: AclStore) -> None:
        super().__init__(authorizer, local.path)
        self.security = security

    async def update(self, plan: Callable[[Authorizer], tuple[frozenset[AclBinding], R]]) -> R:
        async with self._lock:
            try:
                return await self._update(plan)
            except etcd_failures() as exc:
                raise MetadataUnavailableError(f"etcd failed: {exc}") from exc

    async def _update(self, plan: Callable[[Authorizer], tuple[frozenset[AclBinding], R]]) -> R:
        store = self.security.store
        key = self.security.acl_key
        while True:
            found = await store.get(key)
            if found is not None:  # plan against the cluster's newest set
                self.authorizer.replace(decode_acls(found[0]))
            acls, result = plan(self.authorizer)
            if found is not None and acls == self.authorizer.acls:
                return result
            if await store.swap(key, encode_acls(acls), 0 if found is None else found[1]):
                self.authorizer.replace(acls)
                log.info("cluster ACLs changed: %d now", len(acls))
                return result
            log.info("ACLs changed concurrently; planning again")
