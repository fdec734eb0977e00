"""The authorizer's decisions for named principals, without sockets (sans-I/O): Kafka's
StandardAuthorizer rules for patterns, implications, DENY, hosts, wildcards, super users
and allow.everyone.if.no.acl.found; plus the ACL file and the filters of Describe/DeleteAcls."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from logserver.config import ConfigError, load_config
from logserver.security import authorizer_from_settings
from logserver.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    binding_error,
    make_binding,
)
from logserver.security.authorizer import Authorizer, parse_super_users
from logserver.security.store import AclStore, read_acls

Op = AclOperation
T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"


def acl(resource_type: ResourceType, name: str, operation: AclOperation,
        permission: AclPermissionType = ALLOW, principal: str = ALICE, host: str = "*",
        pattern: PatternType = LIT) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


def can(auth: Authorizer, operation: AclOperation, resource_type: ResourceType, name: str,
        principal: str = ALICE, host: str = HOST) -> bool:
    return auth.authorize(principal, host, operation, resource_type, name)


def test_literal_prefixed_and_wildcard_resource_patterns() -> None:
    auth = Authorizer(acls=[acl(T, "orders", Op.WRITE), acl(T, "logs-", Op.READ, pattern=PRE),
                            acl(G, "*", Op.READ)])
    assert can(auth, Op.WRITE, T, "orders")
    assert not can(auth, Op.WRITE, T, "orders2")  # LITERAL is the exact name
    assert not can(auth, Op.READ, T, "orders")  # WRITE does not give READ
    assert can(auth, Op.READ, T, "logs-eu") and can(auth, Op.READ, T, "logs-")
    assert not can(auth, Op.READ, T, "logs")
    assert can(auth, Op.READ, G, "any-group")  # LITERAL "*" is every group
    assert not can(auth, Op.READ, T, "orders", principal=BOB)


def test_implied_operations_apply_to_allow_only() -> None:
    auth = Authorizer(acls=[acl(T, "t", Op.READ), acl(T, "u", Op.ALTER_CONFIGS),
                            acl(T, "v", Op.DELETE), acl(T, "w", Op.ALTER), acl(T, "x", Op.WRITE)])
    for name in ("t", "v", "w", "x"):
        assert can(auth, Op.DESCRIBE, T, name), name
    assert can(auth, Op.DESCRIBE_CONFIGS, T, "u")
    assert not can(auth, Op.DESCRIBE, T, "u")  # ALTER_CONFIGS implies only DESCRIBE_CONFIGS
    assert not can(auth, Op.ALTER_CONFIGS, T, "t")
    # A DENY READ does not deny DESCRIBE; an ALLOW ALL gives everything.
    auth = Authorizer(acls=[acl(T, "t", Op.ALL), acl(T, "t", Op.READ, DENY)])
    assert can(auth, Op.DESCRIBE, T, "t") and can(auth, Op.WRITE, T, "t")
    assert not can(auth, Op.READ, T, "t")


def test_deny_wins_over_allow_at_any_pattern() -> None:
    auth = Authorizer(acls=[acl(T, "*", Op.ALL), acl(T, "secret-", Op.READ, DENY, pattern=PRE),
                            acl(T, "x", Op.ALL, DENY, principal="User:*")])
    assert can(auth, Op.READ, T, "public")
    assert not can(auth, Op.READ, T, "secret-plans")
    assert can(auth, Op.WRITE, T, "secret-plans")
    assert not can(auth, Op.WRITE, T, "x")  # DENY ALL for everyone


def test_host_and_wildcard_principal() -> None:
    auth = Authorizer(acls=[acl(T, "t", Op.READ, host="10.0.0.1"),
                            acl(T, "open", Op.READ, principal="User:*")])
    assert can(auth, Op.READ, T, "t", host="10.0.0.1")
    assert not can(auth, Op.READ, T, "t", host="10.0.0.2")
    assert can(auth, Op.READ, T, "open", principal="User:anyone", host="192.168.1.1")
    # The same address however it is spelled (Java prints IPv6 in full).
    spelled = Authorizer(acls=[acl(T, "v6", Op.READ, host="0:0:0:0:0:0:0:1"),
                               acl(T, "v4", Op.READ, host="::ffff:10.0.0.1")])
    assert can(spelled, Op.READ, T, "v6", host="::1")
    assert can(spelled, Op.READ, T, "v4", host="10.0.0.1")
    assert not can(spelled, Op.READ, T, "v6", host="::2")


def test_super_users_and_allow_everyone_if_no_acl_found() -> None:
    assert parse_super_users(" User:admin ;User:ops;; ") == {"User:admin", "User:ops"}
    auth = Authorizer(super_users=["User:admin"], acls=[acl(T, "t", Op.READ, DENY, principal="User:*")])
    assert can(auth, Op.READ, T, "t", principal="User:admin")  # super users pass DENYs
    assert not can(auth, Op.DESCRIBE, T, "nobody-has-acls")  # default: deny
    open_auth = Authorizer(allow_if_no_acl=True, acls=[acl(T, "t", Op.READ, principal=BOB)])
    assert can(open_auth, Op.WRITE, T, "other")  # no ACL for "other" at all
    assert can(open_auth, Op.CREATE, C, "kafka-cluster")
    assert not can(open_auth, Op.READ, T, "t")  # an ACL for t exists (for bob): no default


def test_acl_changes_reach_cached_decisions() -> None:
    auth = Authorizer()
    assert not can(auth, Op.READ, T, "t")
    acls, errors = auth.plan_create([acl(T, "t", Op.READ)])
    assert errors == [None] and not can(auth, Op.READ, T, "t")  # planned, not installed
    auth.replace(acls)
    assert can(auth, Op.READ, T, "t")
    acls, results = auth.plan_delete([AclBindingFilter(T, "t", LIT, None, None, Op.ANY,
                                                       AclPermissionType.ANY)])
    assert results[0].deleted == (acl(T, "t", Op.READ),)
    auth.replace(acls)
    assert not can(auth, Op.READ, T, "t")


def test_authorize_by_resource_type_as_kafka() -> None:
    """Kafka's authorizeByResourceType (InitProducerId: WRITE on some topic)."""
    def any_write(*acls: AclBinding) -> bool:
        return Authorizer(acls=acls).authorize_by_resource_type(ALICE, HOST, Op.WRITE, T)

    assert not any_write()
    assert any_write(acl(T, "orders", Op.WRITE))
    assert any_write(acl(T, "orders-", Op.ALL, pattern=PRE))
    assert not any_write(acl(T, "orders", Op.WRITE), acl(T, "orders", Op.WRITE, DENY))
    assert not any_write(acl(T, "orders", Op.WRITE), acl(T, "ord", Op.WRITE, DENY, pattern=PRE))
    assert not any_write(acl(T, "*", Op.WRITE), acl(T, "*", Op.WRITE, DENY))
    assert any_write(acl(T, "a", Op.WRITE), acl(T, "b", Op.WRITE, DENY))
    assert not any_write(acl(T, "orders", Op.READ))
    assert Authorizer(super_users=[ALICE]).authorize_by_resource_type(ALICE, HOST, Op.WRITE, T)


def test_authorized_operations_bitfield() -> None:
    auth = Authorizer(acls=[acl(T, "t", Op.READ), acl(G, "g", Op.ALL)])
    bits = auth.authorized_operations(ALICE, HOST, T, "t")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE)
    assert auth.authorized_operations(ALICE, HOST, G, "g") == (1 << 3) | (1 << 6) | (1 << 8)
    assert auth.authorized_operations(BOB, HOST, T, "t") == 0


def test_invalid_bindings_are_refused_with_kafkas_reasons() -> None:
    assert binding_error(acl(T, "t", Op.READ)) is None
    assert "pattern type" in (binding_error(acl(T, "t", Op.READ, pattern=PatternType.MATCH)) or "")
    assert "operation" in (binding_error(acl(T, "t", Op.ANY)) or "")
    assert "kafka-cluster" in (binding_error(acl(C, "other", Op.ALTER)) or "")
    assert "principal" in (binding_error(acl(T, "t", Op.READ, principal="alice")) or "")
    assert "empty" in (binding_error(acl(T, "", Op.READ)) or "")
    assert make_binding(99, "t", 3, ALICE, "*", 3, 3).resource_type == ResourceType.UNKNOWN
    auth = Authorizer()
    acls, errors = auth.plan_create([acl(T, "t", Op.READ), acl(T, "t", Op.ANY)])
    assert errors[0] is None and errors[1] is not None and len(acls) == 1


def test_filters_match_as_kafkas_resource_pattern_filter() -> None:
    acls = [acl(T, "orders", Op.READ), acl(T, "ord", Op.WRITE, pattern=PRE),
            acl(T, "*", Op.DESCRIBE), acl(G, "orders", Op.READ, principal=BOB)]
    auth = Authorizer(acls=acls)

    def names(resource_type: ResourceType, name: str | None, pattern: PatternType,
              principal: str | None = None) -> set[tuple[str, PatternType]]:
        found = auth.describe(AclBindingFilter(resource_type, name, pattern, principal, None,
                                               Op.ANY, AclPermissionType.ANY))
        return {(a.resource_name, a.pattern_type) for a in found}

    assert names(T, "orders", PatternType.MATCH) == {("orders", LIT), ("ord", PRE), ("*", LIT)}
    assert names(T, "orders", PatternType.ANY) == {("orders", LIT)}
    assert names(T, "ord", PRE) == {("ord", PRE)}
    assert names(ResourceType.ANY, None, PatternType.ANY) == {
        ("orders", LIT), ("ord", PRE), ("*", LIT)}
    assert len(auth.describe(AclBindingFilter(ResourceType.ANY, None, PatternType.ANY, BOB, None,
                                              Op.ANY, AclPermissionType.ANY))) == 1
    _, results = auth.plan_delete([AclBindingFilter(ResourceType.UNKNOWN, None, PatternType.ANY,
                                                    None, None, Op.ANY, AclPermissionType.ANY)])
    assert results[0].error is not None and not results[0].deleted


def test_acl_file_round_trip_and_damage(tmp_path: Path) -> None:
    path = tmp_path / "acls.json"
    auth = Authorizer()
    store = AclStore(auth, path)
    store.load()  # no file yet: no ACLs
    binding = acl(T, "t", Op.READ, host="10.0.0.1", pattern=PRE)
    errors = asyncio.run(store.update(lambda a: a.plan_create([binding])))
    assert errors == [None] and auth.acls == {binding}
    assert read_acls(path) == {binding}
    assert json.loads(path.read_text())["acls"][0]["patternType"] == "PREFIXED"
    assert not (tmp_path / "acls.json.tmp").exists()
    path.write_text("{not json")
    with pytest.raises(ValueError, match="cannot read the ACLs"):
        read_acls(path)


def test_settings_turn_authorization_on_only_the_kafka_way() -> None:
    assert authorizer_from_settings(load_config({}, environ={})) is None
    config = load_config({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                          "super.users": "User:admin;User:ops",
                          "allow.everyone.if.no.acl.found": "true"}, environ={})
    auth = authorizer_from_settings(config)
    assert auth is not None and auth.super_users == {"User:admin", "User:ops"}
    assert auth.allow_if_no_acl
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        load_config({"authorizer.class.name": "com.example.MyAuthorizer"}, environ={})
