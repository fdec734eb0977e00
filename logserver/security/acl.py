"""Kafka's ACL vocabulary as data: resource types, pattern types, operations, permissions,
bindings and the filters DescribeAcls/DeleteAcls match them with.

The numeric codes are Kafka's wire codes (``org.apache.kafka.common.acl``), so a binding
read off a CreateAcls request is stored and compared without translation. Sans-I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

__all__ = [
    "ANONYMOUS",
    "CLUSTER_NAME",
    "SUPPORTED_OPERATIONS",
    "WILDCARD",
    "WILDCARD_PRINCIPAL",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourceType",
    "binding_error",
    "filter_error",
    "make_binding",
    "make_filter",
    "operations_bitfield",
]

ANONYMOUS = "User:ANONYMOUS"
WILDCARD = "*"  # any resource name (LITERAL patterns) or any host
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters: any pattern type, names compared exactly
    MATCH = 2  # filters: every pattern that would apply to the named resource
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    DENY = 2
    ALLOW = 3


_O = AclOperation
#: What each resource type can be asked for (Kafka's AclEntry.supportedOperations): the
#: operations an authorized-operations bitfield reports on.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER,
                         _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS),
    ResourceType.GROUP: (_O.READ, _O.DESCRIBE, _O.DELETE),
    ResourceType.CLUSTER: (_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS,
                           _O.IDEMPOTENT_WRITE, _O.ALTER, _O.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (_O.DESCRIBE, _O.WRITE),
    ResourceType.DELEGATION_TOKEN: (_O.DESCRIBE,),
    ResourceType.USER: (_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS),
}


def operations_bitfield(operations: list[AclOperation]) -> int:
    """Kafka's authorized-operations int32: bit ``code`` set for each operation."""
    bits = 0
    for operation in operations:
        bits |= 1 << int(operation)
    return bits


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry, as Kafka stores it."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def to_json(self) -> dict[str, object]:
        return {"resourceType": self.resource_type.name, "resourceName": self.resource_name,
                "patternType": self.pattern_type.name, "principal": self.principal,
                "host": self.host, "operation": self.operation.name,
                "permissionType": self.permission.name}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> AclBinding:
        return cls(ResourceType[str(data["resourceType"])], str(data["resourceName"]),
                   PatternType[str(data["patternType"])], str(data["principal"]),
                   str(data["host"]), AclOperation[str(data["operation"])],
                   AclPermissionType[str(data["permissionType"])])


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls select with; None means "any" for the strings."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType

    def matches(self, acl: AclBinding) -> bool:
        return self._matches_pattern(acl) and self._matches_entry(acl)

    def _matches_pattern(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        wanted = self.pattern_type
        if wanted not in (PatternType.ANY, PatternType.MATCH) and wanted != acl.pattern_type:
            return False
        name = self.resource_name
        if name is None:
            return True
        if wanted in (PatternType.ANY, acl.pattern_type):
            return name == acl.resource_name
        # MATCH: every pattern that applies to the resource called ``name``.
        if acl.pattern_type == PatternType.LITERAL:
            return name == acl.resource_name or acl.resource_name == WILDCARD
        return name.startswith(acl.resource_name)

    def _matches_entry(self, acl: AclBinding) -> bool:
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != acl.operation:
            return False
        return self.permission == AclPermissionType.ANY or self.permission == acl.permission


E = TypeVar("E", bound=IntEnum)


def _enum(kind: type[E], code: int) -> E:
    try:
        return kind(code)
    except ValueError:
        return kind(0)  # UNKNOWN: refused by the validators below


def make_binding(resource_type: int, resource_name: str, pattern_type: int, principal: str,
                 host: str, operation: int, permission: int) -> AclBinding:
    return AclBinding(_enum(ResourceType, resource_type), resource_name,
                      _enum(PatternType, pattern_type), principal, host,
                      _enum(AclOperation, operation), _enum(AclPermissionType, permission))


def make_filter(resource_type: int, resource_name: str | None, pattern_type: int,
                principal: str | None, host: str | None, operation: int,
                permission: int) -> AclBindingFilter:
    return AclBindingFilter(_enum(ResourceType, resource_type), resource_name,
                            _enum(PatternType, pattern_type), principal, host,
                            _enum(AclOperation, operation), _enum(AclPermissionType, permission))


def _principal_error(principal: str) -> str | None:
    kind, colon, name = principal.partition(":")
    if not colon or not kind or not name:
        return (f"could not parse principal {principal!r}: expected principalType:principalName, "
                "e.g. User:alice")
    return None


def binding_error(acl: AclBinding) -> str | None:
    """Why CreateAcls must refuse ``acl`` (INVALID_REQUEST), as Kafka validates a new ACL."""
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"invalid resource type {acl.resource_type.name}"
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"invalid pattern type {acl.pattern_type.name}: use LITERAL or PREFIXED"
    if acl.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"invalid operation {acl.operation.name}"
    if acl.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"invalid permission type {acl.permission.name}: use ALLOW or DENY"
    if not acl.resource_name:
        return "resource name should not be empty"
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return f"the only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    return _principal_error(acl.principal)


def filter_error(acl_filter: AclBindingFilter) -> str | None:
    """Why a DescribeAcls/DeleteAcls filter is refused: an unknown (unset) field."""
    for field, value in (("resource type", acl_filter.resource_type),
                         ("pattern type", acl_filter.pattern_type),
                         ("operation", acl_filter.operation),
                         ("permission type", acl_filter.permission)):
        if value == 0:
            return f"invalid filter: unknown {field}"
    return None
