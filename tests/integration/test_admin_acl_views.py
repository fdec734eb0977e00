"""With Kafka ACLs on, the admin API shows a user only what the Kafka APIs would: the
topics and groups it may DESCRIBE. Real server with StandardAuthorizer, ACLs created with
kafka-python's admin client, the API read with aiohttp as two SCRAM users."""

from __future__ import annotations

import pytest
from helpers.acls import (
    acl_server,  # noqa: F401 - the fixture
)
from helpers.admin_http import get_as

pytestmark = pytest.mark.timeout(120)


def test_lists_show_only_what_the_user_may_describe(acl_server):  # noqa: F811
    status, body = get_as(acl_server.admin_url + "/v1/topics", "viewer")
    assert status == 200
    assert [t["name"] for t in body["topics"]] == ["visible"]  # type: ignore[index]
    status, body = get_as(acl_server.admin_url + "/v1/groups", "viewer")
    assert status == 200
    groups = body["groups"]  # type: ignore[index]
    assert [g["group_id"] for g in groups] == ["g-visible"]
    assert [p["topic"] for p in groups[0]["partitions"]] == ["visible"]
    assert get_as(acl_server.admin_url + "/v1/topics", "stranger")[1] == {"topics": []}
    assert get_as(acl_server.admin_url + "/v1/groups", "stranger")[1] == {"groups": []}


def test_a_topic_asked_for_by_name_needs_describe(acl_server):  # noqa: F811
    assert get_as(acl_server.admin_url + "/v1/topics/visible", "viewer")[0] == 200
    assert get_as(acl_server.admin_url + "/v1/topics/hidden", "viewer")[0] == 403
    assert get_as(acl_server.admin_url + "/v1/topics/visible", "stranger")[0] == 403
