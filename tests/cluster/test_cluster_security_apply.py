"""How a watched etcd value reaches a broker's authorizer and credential store (sans I/O:
``ClusterSecurity.apply`` touches no etcd), with the documents' round trips."""

from __future__ import annotations

from pathlib import Path

from logserver.cluster.security_sync import ClusterSecurity
from logserver.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from logserver.security.authorizer import Authorizer
from logserver.security.credentials import CredentialStore
from logserver.security.scram import make_credential, verify_password
from logserver.security.store import decode_acls, encode_acls

ROOT = b"/c/"
ACL = AclBinding(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:carol", "*",
                 AclOperation.READ, AclPermissionType.ALLOW)


def security(tmp_path: Path) -> ClusterSecurity:
    return ClusterSecurity(ROOT, None, Authorizer(), CredentialStore(tmp_path))  # type: ignore[arg-type]


def test_acl_document_round_trips_and_replaces_the_authorizers_set(tmp_path):
    assert decode_acls(encode_acls(frozenset({ACL}))) == {ACL}
    s = security(tmp_path)
    s.apply(b"/c/acls", encode_acls(frozenset({ACL})))
    assert s.authorizer is not None and s.authorizer.acls == {ACL}
    s.apply(b"/c/acls", encode_acls(frozenset()))
    assert s.authorizer.acls == frozenset()


def test_scram_document_replaces_every_user_and_holds_no_password(tmp_path):
    s = security(tmp_path)
    s.credentials.upsert("local-only", "SCRAM-SHA-256", make_credential("SCRAM-SHA-256", "x"))
    cluster = CredentialStore(tmp_path / "other")
    cluster.upsert("carol", "SCRAM-SHA-256", make_credential("SCRAM-SHA-256", "carol-pw"))
    document = cluster.snapshot()[1]
    assert b"carol-pw" not in document
    s.apply(b"/c/scram_credentials", document)
    assert s.credentials.users() == ["carol"]
    found = s.credentials.lookup("carol", "SCRAM-SHA-256")
    assert found is not None and verify_password("SCRAM-SHA-256", found, "carol-pw")


def test_damaged_or_foreign_values_leave_the_last_good_state(tmp_path):
    s = security(tmp_path)
    s.apply(b"/c/acls", encode_acls(frozenset({ACL})))
    s.apply(b"/c/acls", b"{not json")
    s.apply(b"/c/scram_credentials", b'{"version": 99}')
    s.apply(b"/c/acls", None)  # a deletion: nothing here deletes the key
    s.apply(b"/c/topics/acls", encode_acls(frozenset()))  # another key
    assert s.authorizer is not None and s.authorizer.acls == {ACL}
    assert s.credentials.users() == []
