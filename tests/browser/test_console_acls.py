"""The console's views keep the Kafka ACLs (real server, StandardAuthorizer, SCRAM users
on the admin listener with ``admin.require.auth``): a user sees in the cluster-wide topic
list only the topics it may DESCRIBE, browses records only with READ, reads configs only
with DESCRIBE_CONFIGS and the ACLs only with DESCRIBE on the cluster. Then the console
page itself in headless chromium, logged in as that user (Playwright: one context with
``http_credentials``, every request of the page made in it), browses the record.
"""

from __future__ import annotations

import json

import pytest
from helpers.acls import (
    acl_admin,
    acl_server,  # noqa: F401 - the fixture
    kp_acl,
)
from helpers.admin_http import get_as
from helpers.browser import CHROMIUM, artifacts_dir
from helpers.clienthelpers import kp_produce
from helpers.waiting import wait_until
from kafka.admin import ACLOperation, ResourceType
from playwright.sync_api import sync_playwright

pytestmark = pytest.mark.timeout(120)


def grant(server, *acls) -> None:
    with acl_admin(server) as client:
        result = client.create_acls(list(acls))
        assert not result["failed"], result


def test_console_views_need_the_kafka_rights(acl_server) -> None:  # noqa: F811
    url = acl_server.admin_url
    kp_produce(acl_server.bootstrap, "visible",
               [{"key": b"k", "value": json.dumps({"ok": True}).encode(), "partition": 0}])
    status, body = get_as(url + "/v1/cluster/topics", "viewer")
    assert status == 200 and [t["name"] for t in body["topics"]] == ["visible"], body
    assert get_as(url + "/v1/cluster/topics", "stranger")[1] == {"topics": []}
    records = "/v1/topics/visible/records?partition=0&offset=0"
    assert get_as(url + records, "viewer")[0] == 403  # DESCRIBE only
    assert get_as(url + "/v1/topics/visible/configs", "viewer")[0] == 403
    assert get_as(url + "/v1/acls", "viewer")[0] == 403
    assert get_as(url + "/v1/brokers/1/configs", "viewer")[0] == 403

    grant(acl_server,
          kp_acl("visible", ACLOperation.READ, principal="User:viewer"),
          kp_acl("visible", ACLOperation.DESCRIBE_CONFIGS, principal="User:viewer"),
          kp_acl("kafka-cluster", ACLOperation.DESCRIBE, resource_type=ResourceType.CLUSTER,
                 principal="User:viewer"))
    status, page = wait_until(lambda: (r := get_as(url + records, "viewer"))[0] == 200 and r,
                              30, "READ granted")
    [record] = page["records"]
    assert record["key"]["data"] == "k" and json.loads(record["value"]["data"]) == {"ok": True}
    assert get_as(url + "/v1/topics/hidden/records?partition=0", "viewer")[0] == 403
    status, configs = get_as(url + "/v1/topics/visible/configs", "viewer")
    assert status == 200 and "cleanup.policy" in {c["name"] for c in configs["configs"]}
    status, acls = get_as(url + "/v1/acls", "viewer")
    assert status == 200 and acls["authorizer"] is True
    assert {"resourceType": "TOPIC", "resourceName": "visible", "patternType": "LITERAL",
            "principal": "User:viewer", "host": "*", "operation": "READ",
            "permissionType": "ALLOW"} in acls["acls"]

    shot = artifacts_dir() / "console-acl-viewer.png"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM)
        try:
            context = browser.new_context(
                http_credentials={"username": "viewer", "password": "viewer-pw"},
                viewport={"width": 1280, "height": 800})
            page_ = context.new_page()
            page_.goto(url + "/console")
            page_.wait_for_selector('#topics tr[data-topic="visible"]')
            assert page_.query_selector('#topics tr[data-topic="hidden"]') is None
            page_.click('#tabs button[data-tab="browse"]')
            page_.select_option("#browse-topic", "visible")
            page_.click("#browse-go")
            page_.wait_for_selector('#records tr[data-offset="0"]')
            assert '"ok": true' in page_.inner_text('#records tr[data-offset="0"]')
            page_.screenshot(path=str(shot), full_page=True)
            print(f"console screenshot: {shot}")
        finally:
            browser.close()
