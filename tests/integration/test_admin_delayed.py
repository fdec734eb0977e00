"""Delayed requests and recent request rates of a real server under load: the Produce
purgatory holds exactly the producers waiting for a held fsync (and empties when it
completes), and ``/v1/requests`` shows the rate a paced kafka-python producer sends at,
with totals that move by exactly the requests sent.
"""

from __future__ import annotations

import time

from helpers.admin_http import get, scrape, value
from helpers.clienthelpers import create_topic, kp_close, kp_producer
from helpers.faults import faulty_server
from helpers.waiting import wait_until

PURGATORY = "kafka_server_delayedoperationpurgatory_purgatorysize"
DELAYED = "kafka_server_delayedoperationpurgatory_numdelayedoperations"
WAITING = 3


def test_produce_purgatory_holds_the_requests_waiting_for_their_fsync(server_factory,
                                                                       tmp_path) -> None:
    hold = tmp_path / "hold-fsync"
    server = server_factory(settings={"log.flush.interval.messages": 1},
                            launcher=faulty_server.launcher(hold_fsync_flag=hold))
    create_topic(server.bootstrap, "held", partitions=1)
    producers = [kp_producer(server.bootstrap, acks=-1, linger_ms=0) for _ in range(WAITING)]
    try:
        for producer in producers:  # metadata first: only the Produce requests wait
            producer.partitions_for("held")
        assert value(scrape(server), PURGATORY, delayedOperation="Produce") == 0
        hold.touch()
        futures = [p.send("held", value=b"x" * 10, partition=0) for p in producers]
        wait_until(lambda: value(scrape(server), PURGATORY, delayedOperation="Produce")
                 == WAITING, what=f"{WAITING} delayed produce requests", ignore=(OSError,))
        samples = scrape(server)
        assert value(samples, DELAYED, delayedOperation="Produce") == WAITING
        assert get(server.admin_url + "/v1/requests")[1]["apis"]["Produce"]["waiting"] == WAITING
        assert not any(f.is_done for f in futures)
        hold.unlink()
        for future in futures:
            future.get(timeout=30)
        wait_until(lambda: value(scrape(server), PURGATORY, delayedOperation="Produce") == 0, what="an empty produce purgatory", ignore=(OSError,))
        assert get(server.admin_url + "/v1/requests")[1]["apis"]["Produce"]["waiting"] == 0
    finally:
        hold.unlink(missing_ok=True)
        for producer in producers:
            kp_close(producer)


RATE = 25  # Produce requests per second (each send waits for its answer: one request each)
SECONDS = 11.5  # more than the 10 s window


def test_requests_show_the_recent_rate_and_exact_totals(server) -> None:
    create_topic(server.bootstrap, "paced", partitions=1)
    producer = kp_producer(server.bootstrap, acks=1, linger_ms=0)
    try:
        producer.send("paced", value=b"warm-up", partition=0).get(timeout=30)
        _, before = get(server.admin_url + "/v1/requests")
        total = int(RATE * SECONDS)
        start = time.monotonic()
        for i in range(total):
            pause = start + i / RATE - time.monotonic()
            if pause > 0:
                time.sleep(pause)  # pacing the load, not waiting for a result
            producer.send("paced", value=b"r", partition=0).get(timeout=30)
        achieved = total / (time.monotonic() - start)
        _, after = get(server.admin_url + "/v1/requests")
    finally:
        kp_close(producer)
    produce = after["apis"]["Produce"]
    assert produce["count"] - before["apis"]["Produce"]["count"] == total
    print(f"sent {total} Produce requests at {achieved:.1f}/s; /v1/requests: {produce}")
    assert abs(produce["per_second_10s"] - achieved) <= 0.2 * achieved, (produce, achieved)
    # The minute's window is not full yet: it covers the run and the moments before it.
    assert 0.5 * achieved <= produce["per_second_1m"] <= 1.2 * achieved, (produce, achieved)
    metrics = scrape(server)
    assert value(metrics, "kafka_network_requestmetrics_requests_total",
                 request="Produce") == produce["count"]
