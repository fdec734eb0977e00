"""The live dashboard in Debian's headless chromium (Playwright), against a real server
with its ``--mqtt-bridge`` child: while a kafka-python producer writes at a paced rate,
the throughput chart must show that rate; as a group member commits its way through
the log, the lag the page shows must fall to zero; a paho device appears among the
connected devices; the broker and the partition leaders are listed.

The screenshot is kept: ``$ARTIFACTS_DIR/dashboard.png`` when ARTIFACTS_DIR is set,
else ``tests/artifacts/dashboard.png`` (gitignored); the test prints the path.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
import urllib.request

import paho.mqtt.client as paho
import pytest
from helpers.browser import CHROMIUM, artifacts_dir
from helpers.clienthelpers import create_topic, kp_close, kp_producer
from helpers.serverproc import ServerProcess
from helpers.waiting import wait_until
from playwright.sync_api import Page, sync_playwright

from commonlib.childproc import HOST, can_connect, free_port

pytestmark = pytest.mark.timeout(180)

TOPIC = "dash-readings"
GROUP = "dash-readers"
RATE = 80  # records per second the producer aims at (it measures what it achieved)
SECONDS = 9.0


class PacedProducer(threading.Thread):
    """Sends ``RATE`` records a second for ``SECONDS`` with kafka-python (acks=1) and
    records what it achieved: records acknowledged over the time they took."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.sent = 0
        self.elapsed = 0.0
        self.error: BaseException | None = None

    @property
    def rate(self) -> float:
        return self.sent / self.elapsed

    def run(self) -> None:
        producer = kp_producer(self.bootstrap, linger_ms=0, acks=1)
        try:
            start = time.monotonic()
            futures = []
            total = int(RATE * SECONDS)
            for i in range(total):
                pause = start + i / RATE - time.monotonic()
                if pause > 0:
                    time.sleep(pause)  # pacing the load, not waiting for a result
                futures.append(producer.send(TOPIC, value=b"r" * 100, partition=0))
            for future in futures:
                future.get(timeout=30)
            self.elapsed = time.monotonic() - start
            self.sent = total
        except BaseException as exc:  # reported by the test thread
            self.error = exc
        finally:
            kp_close(producer)


def commit(consumer, offset: int) -> None:
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(offset, "", -1)})


def attribute(page: Page, selector: str, name: str) -> str | None:
    found = page.query_selector(selector)
    return None if found is None else found.get_attribute(name)


def chart_values(page: Page, series: str, chart: str = "throughput") -> list[float]:
    raw = attribute(page, f'#{chart} polyline[data-series="{series}"]', "data-values")
    return [float(v) for v in raw.split(",")] if raw else []


@pytest.fixture
def bridged_server(server_factory) -> tuple[ServerProcess, int]:
    mqtt_port = free_port()
    server = server_factory(extra_args=["--mqtt-bridge", f"{HOST}:{mqtt_port}"])
    wait_until(lambda: can_connect(mqtt_port), what="the bridge's MQTT listener")
    return server, mqtt_port


@pytest.fixture
def device(bridged_server):
    _, mqtt_port = bridged_server
    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="dash-device-1")
    client.connect(HOST, mqtt_port)
    client.loop_start()
    try:
        yield client
    finally:
        client.disconnect()
        client.loop_stop()


def test_dashboard_shows_rate_lag_devices_and_leaders(bridged_server, device) -> None:
    from kafka import KafkaConsumer, TopicPartition

    server, _ = bridged_server
    create_topic(server.bootstrap, TOPIC, partitions=1)
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id=GROUP,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             request_timeout_ms=15000)
    shot = artifacts_dir() / "dashboard.png"
    try:
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        commit(consumer, 0)  # the group exists and starts at the beginning
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 1100})
                page.goto(server.admin_url + "/dashboard")
                page.wait_for_selector('#status[data-state="live"]', timeout=20_000)

                producer = PacedProducer(server.bootstrap)
                producer.start()
                producer.join(timeout=SECONDS + 60)
                assert not producer.is_alive() and producer.error is None, producer.error
                total = producer.sent

                # The chart: one value per 1 s sample; the first and last ones with
                # traffic cover only part of a second, the ones between the full rate.
                def full_samples() -> list[float]:
                    values = chart_values(page, TOPIC)
                    busy = [i for i, v in enumerate(values) if v > 0]
                    if len(busy) < 5 or values[-1] != 0:  # the quiet after it too
                        return []
                    return values[busy[0] + 1:busy[-1]]
                shown = wait_until(full_samples, what="the produced rate on the chart")
                median = statistics.median(shown)
                print(f"producer: {total} records at {producer.rate:.1f}/s; "
                      f"chart: {shown} (median {median})")
                assert abs(median - producer.rate) <= 0.2 * producer.rate, (shown, producer.rate)

                # The producer's requests showed on the requests table while it ran.
                produce_rates = [r.get("Produce", 0) for r in page.evaluate(
                    "samples.map(s => s.requests_per_second)")]
                assert max(produce_rates) > 0, produce_rates  # (batching may merge records)

                # The topic table and the API agree on the size; the partition's leader.
                with urllib.request.urlopen(server.admin_url + f"/v1/topics/{TOPIC}") as r:
                    size = json.loads(r.read())["partitions"][0]["size_bytes"]
                row = f'#topics tr[data-topic="{TOPIC}"]'
                wait_until(lambda: attribute(page, row, "data-size") == str(size), what="the size")
                part = f'#partitions tr[data-topic="{TOPIC}"][data-partition="0"]'
                assert attribute(page, part, "data-leader") == "1"
                assert "controller" in page.inner_text('#brokers tr[data-node="1"]')
                wait_until(lambda: page.query_selector(
                    '#device-list tr[data-client="dash-device-1"]'), what="the device")
                assert attribute(page, "#devices", "data-connected") == "1"

                # The lag falls as the group's member catches up, step by step.
                group = f'#groups tr[data-group="{GROUP}"]'
                wait_until(lambda: attribute(page, group, "data-lag") == str(total), what=f"lag {total}")
                consumed = 0
                seen = [total]
                for step in (1, 2, 3, 4):
                    target = total * step // 4
                    while consumed < target:
                        batch = consumer.poll(timeout_ms=1000, max_records=target - consumed)
                        consumed += sum(len(records) for records in batch.values())
                    commit(consumer, consumed)
                    wait_until(lambda lag=total - consumed: attribute(page, group, "data-lag")
                               == str(lag), what=f"lag {total - consumed}")
                    seen.append(total - consumed)
                assert seen == sorted(seen, reverse=True) and seen[-1] == 0, seen
                lag_line = chart_values(page, GROUP, chart="lag")
                assert lag_line[-1] == 0 and max(lag_line) == total, lag_line
                page.screenshot(path=str(shot), full_page=True)
                print(f"dashboard screenshot: {shot}")
            finally:
                browser.close()
    finally:
        consumer.close()
    assert shot.stat().st_size > 10_000
