"""The console in Debian's headless chromium (Playwright) on three real brokers with
broker 3 stopped, opened on broker 1's admin listener: broker 3 shows as down and the
partitions it held as under-replicated; the topic browser reads a page of records from
an offset and the next page; the lag per partition of a group that broker 2 coordinates
is shown; a topic's configs are listed and broker 3's are said to be unavailable.

Screenshots are kept: ``$ARTIFACTS_DIR/console-*.png`` when ARTIFACTS_DIR is set, else
``tests/artifacts/console-*.png`` (gitignored); the test prints the paths.
"""

from __future__ import annotations

import json
import urllib.request

import pytest
from confluent_kafka.admin import NewTopic
from helpers.browser import CHROMIUM, artifacts_dir
from helpers.clienthelpers import kp_produce
from helpers.clusterprocs import Cluster
from helpers.group_offsets import commit, group_on
from helpers.waiting import wait_until
from playwright.sync_api import Page, sync_playwright

pytestmark = pytest.mark.timeout(240)

TOPIC = "console-readings"
N = 40
COMMITTED = 15


def attribute(page: Page, selector: str, name: str) -> str | None:
    found = page.query_selector(selector)
    return None if found is None else found.get_attribute(name)


def offsets_shown(page: Page) -> list[int]:
    return [int(row.get_attribute("data-offset") or -1)
            for row in page.query_selector_all("#records tbody tr")]


def broker_states(url: str) -> dict[int, str]:
    with urllib.request.urlopen(url + "/v1/cluster", timeout=20) as response:
        return {b["node_id"]: b["state"] for b in json.loads(response.read())["brokers"]}


def test_console_browses_records_shows_lag_and_a_down_broker(cluster: Cluster) -> None:
    admin = cluster.admin()
    for future in admin.create_topics([NewTopic(TOPIC, 2, 3)]).values():
        future.result(timeout=30)
    kp_produce(cluster.bootstrap, TOPIC, [
        {"key": f"sensor-{i}".encode(), "value": json.dumps({"reading": i}).encode(),
         "headers": [("unit", b"celsius")], "partition": 0} for i in range(N)])
    group = group_on(cluster, 2)
    wait_until(lambda: commit(admin, group, TOPIC, COMMITTED), 60, "the commit")
    cluster.brokers[3].stop()
    one = cluster.brokers[1].admin_url
    wait_until(lambda: broker_states(one) == {1: "alive", 2: "alive", 3: "down"}, 60,
               "broker 3 down on broker 1's API")

    shots = {name: artifacts_dir() / f"console-{name}.png"
             for name in ("overview", "records", "group")}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(one + "/console")
            page.wait_for_selector('#brokers tr[data-node="3"][data-state="down"].bad',
                                   timeout=30_000)
            assert attribute(page, '#brokers tr[data-node="1"]', "data-state") == "alive"
            page.wait_for_selector(f'#topics tr[data-topic="{TOPIC}"]'
                                   '[data-health="under-replicated"]', timeout=60_000)
            alerts = page.inner_text("#alerts")
            assert "broker 3 is down" in alerts and TOPIC in alerts, alerts
            # Internal topics only behind the toggle.
            assert page.query_selector('#topics tr[data-topic="__consumer_offsets"]') is None
            page.check("#show-internal")
            page.wait_for_selector('#topics tr[data-topic="__consumer_offsets"]')
            page.uncheck("#show-internal")
            page.screenshot(path=str(shots["overview"]), full_page=True)

            # The topic browser: a page from offset 5, then the next one.
            page.click('#tabs button[data-tab="browse"]')
            page.select_option("#browse-topic", TOPIC)
            page.fill("#browse-partition", "0")
            page.fill("#browse-offset", "5")
            page.fill("#browse-limit", "5")
            page.click("#browse-go")
            wait_until(lambda: offsets_shown(page) == [5, 6, 7, 8, 9], 30, "offsets 5-9")
            row = page.inner_text('#records tr[data-offset="5"]')
            assert "sensor-5" in row and '"reading": 5' in row and "unit" in row, row
            assert attribute(page, '#records tr[data-offset="5"] td.value pre',
                             "data-format") == "json"
            page.screenshot(path=str(shots["records"]), full_page=True)
            page.click("#browse-next")
            wait_until(lambda: offsets_shown(page) == [10, 11, 12, 13, 14], 30,
                       "offsets 10-14")

            # The group's lag per partition, from broker 2 (its coordinator).
            page.click('#tabs button[data-tab="overview"]')
            page.click(f'#groups tr[data-group="{group}"]')
            detail = f'#group-detail tr[data-topic="{TOPIC}"][data-partition="0"]'
            page.wait_for_selector(detail)
            assert attribute(page, detail, "data-lag") == str(N - COMMITTED)
            assert "coordinator broker 2" in page.inner_text("#group-info")
            page.screenshot(path=str(shots["group"]), full_page=True)

            # Configs: the topic's, and broker 3's are unavailable while it is down.
            page.click('#tabs button[data-tab="configs"]')
            page.select_option("#config-kind", "topic")
            page.select_option("#config-name", TOPIC)
            page.click("#configs-form button")
            page.wait_for_selector('#configs tr[data-config="cleanup.policy"]')
            page.select_option("#config-kind", "broker")
            page.select_option("#config-name", "3")
            page.click("#configs-form button")
            wait_until(lambda: "down" in page.inner_text("#configs-info"), 30,
                       "broker 3 down")
        finally:
            browser.close()
    for shot in shots.values():
        print(f"console screenshot: {shot}")
        assert shot.stat().st_size > 10_000
