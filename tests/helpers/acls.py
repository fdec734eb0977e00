"""ACLs through kafka-python's admin client for the authorization tests (Kafka's
StandardAuthorizer on a real server), and a server with SCRAM users, topics, groups
and ACLs set up for the admin API's filtered views."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kafka.admin import (
    ACL,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourceType,
)
from kafka.structs import OffsetAndMetadata, TopicPartition

from helpers.clienthelpers import create_topic, kp_admin, kp_consumer
from helpers.kafkasec import STANDARD, add_user
from helpers.serverproc import ServerProcess

ANON = "User:ANONYMOUS"


@pytest.fixture
def acl_server(server_factory, tmp_path):
    """A server with the StandardAuthorizer and an admin API that needs a login: SCRAM users
    viewer and stranger, topics visible and hidden, groups g-visible and g-hidden, and
    DESCRIBE on the visible ones for viewer only."""
    data = tmp_path / "data"
    for user in ("viewer", "stranger"):
        add_user(data, user, "SCRAM-SHA-256", f"{user}-pw")
    srv = server_factory(data_dir=data, settings={
        "authorizer.class.name": STANDARD, "super.users": "User:ANONYMOUS",
        "admin.require.auth": "true"})
    for topic in ("visible", "hidden"):
        create_topic(srv.bootstrap, topic, partitions=1)
    for group in ("g-visible", "g-hidden"):
        consumer = kp_consumer(srv.bootstrap, group_id=group, enable_auto_commit=False)
        try:
            consumer.commit({TopicPartition("visible", 0): OffsetAndMetadata(0, "", -1),
                             TopicPartition("hidden", 0): OffsetAndMetadata(0, "", -1)})
        finally:
            consumer.close()
    with acl_admin(srv) as client:
        result = client.create_acls([
            kp_acl("visible", ACLOperation.DESCRIBE, principal="User:viewer"),
            kp_acl("g-visible", ACLOperation.DESCRIBE, resource_type=ResourceType.GROUP,
                   principal="User:viewer")])
        assert not result["failed"], result
    return srv



def kp_acl(name: str, operation: ACLOperation, permission: ACLPermissionType = ACLPermissionType.ALLOW,
           resource_type: ResourceType = ResourceType.TOPIC, principal: str = ANON,
           pattern: ACLResourcePatternType = ACLResourcePatternType.LITERAL) -> ACL:
    return ACL(principal=principal, host="*", operation=operation, permission_type=permission,
               resource_pattern=ResourcePattern(resource_type, name, pattern))


@contextmanager
def acl_admin(srv: ServerProcess) -> Iterator[Any]:
    """kafka-python's admin client of ``srv``, closed on the way out."""
    client = kp_admin(srv.bootstrap)
    try:
        yield client
    finally:
        client.close()
