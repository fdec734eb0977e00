"""With Kafka ACLs on, the admin API shows a user only what the Kafka APIs would: the
topics and groups it may DESCRIBE. Real server with StandardAuthorizer, ACLs created with
kafka-python's admin client, the API read with aiohttp as two SCRAM users."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from helpers.clienthelpers import create_topic, kp_consumer
from kafka.admin import ACLOperation, ResourceType
from kafka.structs import OffsetAndMetadata, TopicPartition
from test_kafka_sasl import add_user
from test_security_acls import STANDARD, admin, kp_acl

pytestmark = pytest.mark.timeout(120)


def _get(url: str, user: str) -> tuple[int, object]:
    async def get() -> tuple[int, object]:
        async with aiohttp.ClientSession() as session, session.get(
                url, auth=aiohttp.BasicAuth(user, f"{user}-pw")) as r:
            return r.status, await r.json()

    return asyncio.run(get())


@pytest.fixture
def acl_server(server_factory, tmp_path):
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
    with admin(srv) as client:
        result = client.create_acls([
            kp_acl("visible", ACLOperation.DESCRIBE, principal="User:viewer"),
            kp_acl("g-visible", ACLOperation.DESCRIBE, resource_type=ResourceType.GROUP,
                   principal="User:viewer")])
        assert not result["failed"], result
    return srv


def test_lists_show_only_what_the_user_may_describe(acl_server):
    status, body = _get(acl_server.admin_url + "/v1/topics", "viewer")
    assert status == 200
    assert [t["name"] for t in body["topics"]] == ["visible"]  # type: ignore[index]
    status, body = _get(acl_server.admin_url + "/v1/groups", "viewer")
    assert status == 200
    groups = body["groups"]  # type: ignore[index]
    assert [g["group_id"] for g in groups] == ["g-visible"]
    assert [p["topic"] for p in groups[0]["partitions"]] == ["visible"]
    assert _get(acl_server.admin_url + "/v1/topics", "stranger")[1] == {"topics": []}
    assert _get(acl_server.admin_url + "/v1/groups", "stranger")[1] == {"groups": []}


def test_a_topic_asked_for_by_name_needs_describe(acl_server):
    assert _get(acl_server.admin_url + "/v1/topics/visible", "viewer")[0] == 200
    assert _get(acl_server.admin_url + "/v1/topics/hidden", "viewer")[0] == 403
    assert _get(acl_server.admin_url + "/v1/topics/visible", "stranger")[0] == 403
