"""The admin HTTP API and /metrics of a real server, driven by real Kafka clients.

Every response is checked against the server's own /openapi.json by schemathesis, and
the Prometheus counters must move by exactly what a kafka-python producer sent.
"""

from __future__ import annotations

import time

import pytest
import schemathesis
from helpers.admin_http import get, scrape, value
from helpers.clienthelpers import (
    create_topic,
    kp_close,
    kp_consumer,
    kp_producer,
    kp_send_each,
)
from helpers.faults import faulty_server
from helpers.serverproc import ServerProcess
from helpers.waiting import wait_until
from hypothesis import HealthCheck, settings

N = 40
# One record per batch (each send waits for its ack): a 61-byte v2 batch header and a
# 109-byte record (length 2, attributes 1, timestamp delta 1, offset delta 1, null key 1,
# value length 2, value 100, header count 1).
BATCH_BYTES = 61 + 109


def commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    """A real group member commits ``offset`` for partition 0 of ``topic``."""
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer = kp_consumer(bootstrap, group_id=group)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.commit({tp: OffsetAndMetadata(offset, "", -1)})
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def admin_server(request, tmp_path_factory) -> ServerProcess:
    """A server holding a topic with records and a group that lags behind them."""
    srv = ServerProcess(tmp_path_factory.mktemp("admin") / "data")
    request.addfinalizer(srv.stop)
    srv.start()
    create_topic(srv.bootstrap, "inventory", partitions=2)
    kp_send_each(srv.bootstrap, "inventory", 10)
    commit(srv.bootstrap, "auditors", "inventory", 4)
    return srv


def test_endpoints_show_topics_partitions_groups_and_readiness(admin_server: ServerProcess) -> None:
    base = admin_server.admin_url
    status, cluster = get(base + "/v1/cluster")
    assert status == 200 and cluster["brokers"][0]["port"] == admin_server.port
    status, topics = get(base + "/v1/topics")
    names = {t["name"]: t for t in topics["topics"]}
    assert names["inventory"]["partitions"] == 2 and names["inventory"]["messages"] == 10
    status, topic = get(base + "/v1/topics/inventory")
    p0 = topic["partitions"][0]
    assert (p0["log_start_offset"], p0["log_end_offset"], p0["high_watermark"]) == (0, 10, 10)
    assert p0["segment_count"] == 1 and p0["size_bytes"] == 10 * BATCH_BYTES
    assert topic["partitions"][1]["size_bytes"] == 0
    status, missing = get(base + "/v1/topics/nope")
    assert status == 404 and "nope" in missing["error"]
    status, groups = get(base + "/v1/groups")
    auditors = next(g for g in groups["groups"] if g["group_id"] == "auditors")
    assert auditors["lag"] == 6
    assert auditors["partitions"] == [{"topic": "inventory", "partition": 0, "committed_offset": 4,
                                       "high_watermark": 10, "lag": 6}]
    status, ready = get(base + "/v1/status/ready")
    assert status == 200 and ready["ready"] is True
    status, requests = get(base + "/v1/requests")
    assert requests["apis"]["Produce"]["count"] == 10


def test_connections_lists_an_open_client(admin_server: ServerProcess) -> None:
    producer = kp_producer(admin_server.bootstrap)
    try:
        producer.send("inventory", value=b"x", partition=1).get(timeout=30)
        _, listed = get(admin_server.admin_url + "/v1/connections")
        assert listed["open"] >= 1 and len(listed["connections"]) == listed["open"]
        assert all(c["peer"].startswith("127.0.0.1:") for c in listed["connections"])
    finally:
        kp_close(producer)


@pytest.fixture(scope="module")
def admin_schema(admin_server: ServerProcess):
    return schemathesis.openapi.from_url(admin_server.admin_url + "/openapi.json")


schema = schemathesis.pytest.from_fixture("admin_schema")


@schema.parametrize()
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_response_conforms_to_openapi(case) -> None:
    case.call_and_validate()


def test_metrics_move_by_exactly_what_was_produced_and_fetched(server: ServerProcess) -> None:
    create_topic(server.bootstrap, "metered", partitions=1)
    before = scrape(server)
    kp_send_each(server.bootstrap, "metered", N)
    after = scrape(server)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("kafka_server_brokertopicmetrics_messagesin_total", topic="metered") == N
    assert delta("kafka_server_brokertopicmetrics_bytesin_total", topic="metered") == N * BATCH_BYTES
    assert value(after, "kafka_log_log_size", topic="metered", partition="0") == N * BATCH_BYTES
    assert value(after, "kafka_log_log_logendoffset", topic="metered", partition="0") == N
    assert value(after, "kafka_log_log_numlogsegments", topic="metered", partition="0") == 1
    assert delta("kafka_network_requestmetrics_requests_total", request="Produce") == N
    assert delta("kafka_network_requestmetrics_totaltimems_count", request="Produce") == N
    assert delta("kafka_network_requestmetrics_totaltimems_bucket",
                 request="Produce", le="+Inf") == N

    consumer = kp_consumer(server.bootstrap, fetch_max_wait_ms=3000)
    try:
        from kafka import TopicPartition

        consumer.assign([TopicPartition("metered", 0)])
        got = 0
        deadline = time.monotonic() + 30
        while got < N and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += len(records)
        assert got == N
        fetched = scrape(server)
        assert value(fetched, "kafka_server_socketservermetrics_connection_count") >= 1

        def parked() -> bool:  # the consumer's next fetch waits at the log end
            consumer.poll(timeout_ms=100)
            return value(scrape(server), "kafka_server_delayedoperationpurgatory_purgatorysize",
                         delayedOperation="Fetch") == 1
        wait_until(parked, what="a parked fetch", ignore=(OSError,))
    finally:
        consumer.close()
    assert value(fetched, "kafka_server_brokertopicmetrics_bytesout_total",
                 topic="metered") == N * BATCH_BYTES

    commit(server.bootstrap, "metered-readers", "metered", N - 15)
    lagging = scrape(server)
    assert value(lagging, "kafka_consumergroup_lag", consumergroup="metered-readers", topic="metered",
                 partition="0") == 15
    assert value(lagging, "kafka_consumergroup_current_offset", consumergroup="metered-readers",
                 topic="metered", partition="0") == N - 15
    # a single broker is its own controller and leads every partition it holds
    assert value(lagging, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(lagging, "kafka_server_replicamanager_leadercount") >= 1
    assert value(lagging, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    # prometheus-client's process and Python runtime collectors
    assert value(lagging, "process_resident_memory_bytes") > 0
    assert value(lagging, "process_open_fds") > 0
    assert any(name == "python_info" for name, _ in lagging)
    assert any(name == "python_gc_collections_total" for name, _ in lagging)


def test_not_ready_while_the_data_directory_recovers(server_factory, tmp_path) -> None:
    """Recovery runs off the loop: live answers, ready says 503, data endpoints 503."""
    hold = tmp_path / "hold-recovery"
    hold.touch()
    server = server_factory(start=False,
                            launcher=faulty_server.launcher(hold_recovery_flag=hold))
    server.start(wait=False)
    base = server.admin_url
    status, live = wait_until(lambda: get(base + "/v1/status/live"), what="the admin listener", ignore=(OSError,))
    assert status == 200 and live["recovering"] is True and live["ready"] is False
    status, ready = get(base + "/v1/status/ready")
    assert status == 503 and ready["ready"] is False
    status, body = get(base + "/v1/topics")
    assert status == 503 and "recovering" in body["error"]
    assert value(scrape(server), "logserver_ready") == 0
    hold.unlink()
    wait_until(lambda: get(base + "/v1/status/ready")[0] == 200, what="readiness after recovery", ignore=(OSError,))
    server.wait_ready()
    assert value(scrape(server), "logserver_ready") == 1


def test_fsync_histogram_counts_every_flush_round(server_factory) -> None:
    """log.flush.interval.messages=1: each acknowledged append waited for one flush round."""
    server = server_factory(settings={"log.flush.interval.messages": 1})
    create_topic(server.bootstrap, "synced", partitions=1)
    before = scrape(server)
    kp_send_each(server.bootstrap, "synced", 10)
    after = scrape(server)
    name = "kafka_log_logflushstats_logflushrateandtimems"
    assert value(after, name + "_count") - value(before, name + "_count") == 10
    assert value(after, name + "_sum") > value(before, name + "_sum")
    assert value(after, name + "_bucket", le="+Inf") == value(after, name + "_count")
