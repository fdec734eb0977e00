"""The authorization decision, as Kafka's StandardAuthorizer makes it. Sans-I/O.

For a principal at a host asking for an operation on a resource:

1. a super user (``super.users``) may do anything;
2. the ACLs that apply are those of the resource's type whose pattern is the LITERAL name,
   the LITERAL wildcard ``*``, or a PREFIXED prefix of the name; among them, those for
   the principal or ``User:*`` and for the host or ``*``;
3. a DENY for the operation (or ALL) wins over any ALLOW;
4. an ALLOW matches the operation, ALL, or an operation that implies it: READ, WRITE,
   DELETE and ALTER imply DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS (ALLOW only:
   a DENY READ does not deny DESCRIBE);
5. nothing matched: denied, unless no ACL at all applies to the resource (for anyone)
   and ``allow.everyone.if.no.acl.found`` is true.

Decisions are cached per (principal, host, operation, resource) until the ACLs change,
so the produce and fetch paths pay a dictionary lookup per topic.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from logserver.security.acl import (
    SUPPORTED_OPERATIONS,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    binding_error,
    filter_error,
    operations_bitfield,
)

__all__ = ["Authorizer", "DeleteResult", "canonical_host", "parse_super_users"]

_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS,
                                              AclOperation.ALTER_CONFIGS}),
}
_CACHE_LIMIT = 100_000  # decisions kept before the cache starts over
# authorize_by_resource_type asks about this name first, so super users and
# allow.everyone.if.no.acl.found count as they do in Kafka.
_PROBE_NAME = "hardcode"


@lru_cache(maxsize=4096)
def canonical_host(host: str) -> str:
    """One spelling per address, so an ACL for ``0:0:0:0:0:0:0:1`` (how Java prints it)
    or ``::ffff:10.0.0.1`` matches a client at ``::1`` or ``10.0.0.1``; names stay as given."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return address.compressed


def _host_matches(acl_host: str, host: str) -> bool:
    return acl_host in (WILDCARD, host) or canonical_host(acl_host) == canonical_host(host)


def parse_super_users(text: str) -> frozenset[str]:
    """``super.users``: principals separated by semicolons, as Kafka reads it."""
    return frozenset(part.strip() for part in text.split(";") if part.strip())


@dataclass(frozen=True, slots=True)
class DeleteResult:
    """What one DeleteAcls filter did: an error message, or the ACLs it removed."""

    error: str | None
    deleted: tuple[AclBinding, ...]


class _Index:
    """ACLs of one resource type by LITERAL name and by PREFIXED prefix."""

    def __init__(self) -> None:
        self.literal: dict[str, list[AclBinding]] = {}
        self.prefixed: dict[str, list[AclBinding]] = {}
        self.prefix_lengths: list[int] = []

    def add(self, acl: AclBinding) -> None:
        if acl.pattern_type == PatternType.LITERAL:
            self.literal.setdefault(acl.resource_name, []).append(acl)
        else:
            self.prefixed.setdefault(acl.resource_name, []).append(acl)

    def finish(self) -> None:
        self.prefix_lengths = sorted({len(prefix) for prefix in self.prefixed})

    def applying_to(self, name: str) -> Iterable[AclBinding]:
        yield from self.literal.get(name, ())
        if name != WILDCARD:
            yield from self.literal.get(WILDCARD, ())
        for length in self.prefix_lengths:
            if length > len(name):
                break
            yield from self.prefixed.get(name[:length], ())


class Authorizer:
    """ACLs plus ``super.users`` and ``allow.everyone.if.no.acl.found``; answers questions.

    The ACL set itself changes only through :meth:`replace` (the store persists a new set
    first, then installs it), so a decision never sees half of a CreateAcls batch.
    """

    def __init__(self, super_users: Iterable[str] = (), allow_if_no_acl: bool = False,
                 acls: Iterable[AclBinding] = ()) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._acls: frozenset[AclBinding] = frozenset()
        self._index: dict[ResourceType, _Index] = {}
        self._cache: dict[tuple[str, str, AclOperation, ResourceType, str], bool] = {}
        self.replace(frozenset(acls))

    # -- the ACL set ------------------------------------------------------------------

    @property
    def acls(self) -> frozenset[AclBinding]:
        return self._acls

    def replace(self, acls: frozenset[AclBinding]) -> None:
        index: dict[ResourceType, _Index] = {}
        for acl in acls:
            index.setdefault(acl.resource_type, _Index()).add(acl)
        for part in index.values():
            part.finish()
        self._acls, self._index = acls, index
        self._cache = {}

    def plan_create(self, bindings: list[AclBinding]) -> tuple[frozenset[AclBinding], list[str | None]]:
        """The ACL set with ``bindings`` added, and per binding None or why it was refused.

        An ACL that exists already is a success that changes nothing, as in Kafka.
        """
        errors = [binding_error(acl) for acl in bindings]
        added = {acl for acl, error in zip(bindings, errors, strict=True) if error is None}
        return self._acls | added, errors

    def plan_delete(self, filters: list[AclBindingFilter]) -> (
            tuple[frozenset[AclBinding], list[DeleteResult]]):
        """The ACL set without what ``filters`` match, and what each filter removed."""
        results = []
        removed: set[AclBinding] = set()
        for acl_filter in filters:
            error = filter_error(acl_filter)
            if error is not None:
                results.append(DeleteResult(error, ()))
                continue
            matched = tuple(sorted(acl for acl in self._acls if acl_filter.matches(acl)))
            removed.update(matched)
            results.append(DeleteResult(None, matched))
        return self._acls - removed, results

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return sorted(acl for acl in self._acls if acl_filter.matches(acl))

    # -- decisions --------------------------------------------------------------------

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        key = (principal, host, operation, resource_type, name)
        decision = self._cache.get(key)
        if decision is None:
            decision = self._decide(principal, host, operation, resource_type, name)
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache = {}
            self._cache[key] = decision
        return decision

    def _decide(self, principal: str, host: str, operation: AclOperation,
                resource_type: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        index = self._index.get(resource_type)
        if index is None:
            return self.allow_if_no_acl
        any_acl = allowed = False
        implied = _IMPLIED_BY.get(operation)
        for acl in index.applying_to(name):
            any_acl = True
            if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if not _host_matches(acl.host, host):
                continue
            if acl.permission == AclPermissionType.DENY:
                if acl.operation in (AclOperation.ALL, operation):
                    return False
            elif (acl.operation == AclOperation.ALL or acl.operation == operation
                  or (implied is not None and acl.operation in implied)):
                allowed = True
        if allowed:
            return True
        return self.allow_if_no_acl and not any_acl

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """May the principal do ``operation`` on at least one resource of this type?

        Kafka's rule (used for InitProducerId, KIP-679): some ALLOW pattern for the
        operation that no DENY pattern dominates.
        """
        if self.authorize(principal, host, operation, resource_type, _PROBE_NAME):
            return True
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allows: list[AclBinding] = []
        for acl in self._acls:
            if acl.resource_type != resource_type:
                continue
            if not _host_matches(acl.host, host):
                continue
            if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.operation not in (operation, AclOperation.ALL):
                continue
            if acl.permission == AclPermissionType.DENY:
                if acl.pattern_type == PatternType.LITERAL:
                    if acl.resource_name == WILDCARD:
                        return False
                    deny_literal.add(acl.resource_name)
                else:
                    deny_prefixed.add(acl.resource_name)
            else:
                allows.append(acl)
        if any(a.pattern_type == PatternType.LITERAL and a.resource_name == WILDCARD for a in allows):
            return True
        for acl in allows:
            name = acl.resource_name
            if acl.pattern_type == PatternType.LITERAL and name in deny_literal:
                continue
            if not any(name[:length] in deny_prefixed for length in range(1, len(name) + 1)):
                return True
        return False

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType,
                              name: str) -> int:
        """Kafka's authorized-operations bitfield for one resource (Metadata, DescribeGroups)."""
        return operations_bitfield([
            operation for operation in SUPPORTED_OPERATIONS.get(resource_type, ())
            if self.authorize(principal, host, operation, resource_type, name)])
