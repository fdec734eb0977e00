"""The pipelines through Spark's stock Kafka source and sink against a real logserver.

These need Spark's Kafka connector jars (spark-sql-kafka-0-10 and its dependencies),
which are not in the pyspark wheel and cannot be downloaded on machines without Maven
Central: they run when the jars are present (``SPARK_KAFKA_JARS=/dir``, or the Ivy
cache of an earlier ``spark.jars.packages`` download) and otherwise skip, saying so.
"""

from __future__ import annotations

import json
import time

import pytest
from helpers.spark_support import require_connector
from kafka import KafkaProducer
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from spark_examples import anomaly_alerts, common, device_telemetry, replay, simulate
from spark_examples.kafkaframe import fetch_records, records_to_frame
from spark_examples.schemas import KAFKA_SOURCE_SCHEMA

MIN = 60_000


def recent_minute_ms(minutes_ago: int = 10) -> int:
    """A minute boundary a few minutes before now, as epoch ms. Record timestamps must be
    near the broker's clock: it refuses CreateTimes more than message.timestamp.after.max.ms
    (one hour, as in Kafka 4) in the future, so tests cannot use fixed dates."""
    return (int(time.time() * 1000) // MIN - minutes_ago) * MIN


@pytest.fixture(autouse=True)
def _connector(spark) -> None:
    require_connector(spark)


def produce_timed(bootstrap: str, topic: str, items: list[tuple[bytes, bytes, int]], headers=None) -> None:
    """(key, value, CreateTime ms) records, each acknowledged."""
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        futs = [p.send(topic, key=k, value=v, timestamp_ms=ts, headers=headers or []) for k, v, ts in items]
        p.flush(timeout=30)
        for f in futs:
            f.get(timeout=30)
    finally:
        p.close(timeout=10)


def read_batch(spark: SparkSession, bootstrap: str, topic: str | None = None, **opts: str):
    """A batch read of ``topic`` (or of what ``opts`` subscribe/assign)."""
    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("includeHeaders", "true")
    )
    if topic is not None:
        reader = reader.option("subscribe", topic)
    for k, v in opts.items():
        reader = reader.option(k, v)
    return reader.load()


def test_kafka_source_yields_the_rows_the_tests_build(spark, module_server) -> None:
    """The equivalence the connector-free tests rely on, checked against the real source."""
    topic = "connector-equivalence"
    base = recent_minute_ms()
    items = [(f"k{i % 4}".encode(), f"v{i}".encode(), base + i) for i in range(20)]
    produce_timed(module_server.bootstrap, topic, items[:10])
    produce_timed(module_server.bootstrap, topic, items[10:], headers=[("mqtt.topic", b"devices/x/telemetry")])
    real = read_batch(spark, module_server.bootstrap, topic, startingOffsets="earliest", endingOffsets="latest")
    assert real.schema == KAFKA_SOURCE_SCHEMA
    built = records_to_frame(spark, fetch_records(module_server.bootstrap, topic, min_records=20))
    order = ["partition", "offset"]
    assert [tuple(r) for r in real.orderBy(*order).collect()] == [tuple(r) for r in built.orderBy(*order).collect()]


def test_device_telemetry_pipeline_against_logserver(spark, module_server, tmp_path) -> None:
    bs = module_server.bootstrap
    topic, out_topic = "connector-telemetry", "connector-telemetry-aggregates"
    end_ms = recent_minute_ms(1)
    sent = list(simulate.generate(3, 36, step_ms=10_000, end_ms=end_ms, seed=5))  # 6 minutes per device
    produce_timed(bs, topic, [(r.device_id.encode(), r.payload, end_ms) for r in sent])
    args = device_telemetry.build_parser().parse_args([
        "--bootstrap-servers", bs, "--topic", topic, "--output-topic", out_topic,
        "--output-dir", str(tmp_path / "out"), "--checkpoint-dir", str(tmp_path / "ckpt"), "--available-now",
    ])
    assert common.run_queries(spark, device_telemetry.start_queries(spark, args), timeout_s=180) == 0
    stats = spark.read.parquet(str(tmp_path / "out"))
    n = stats.count()
    assert n > 0
    watermark = max(r.ts_ms for r in sent) - 120_000
    assert stats.where(F.unix_millis("window_end") > watermark).count() == 0, "only closed windows"
    msgs = fetch_records(bs, out_topic, min_records=n)
    assert len(msgs) == n
    for m in msgs:
        body = json.loads(m.value)
        assert body["device_id"] == m.key.decode() and body["count"] >= 1


def test_replay_reads_offset_and_timestamp_ranges(spark, module_server) -> None:
    bs = module_server.bootstrap
    topic = "connector-replay"
    base = recent_minute_ms()
    items = [(b"dev", json.dumps({"device_id": "dev", "ts": base + i * 1000, "temperature": float(i)}).encode(), base + i * 1000) for i in range(10)]
    produce_timed(bs, topic, items)  # one key: all in one partition
    written = fetch_records(bs, topic, min_records=10)
    part = written[0].partition
    # the by-timestamp ranges use the CreateTimes the log holds, as a user reads them
    ts = {r.offset: r.timestamp for r in written}
    assert sorted(ts.values()) == [base + i * 1000 for i in range(10)]

    opts = replay.offset_options(topic, partition_offsets=[f"{part}=2:5"])
    rows = read_batch(spark, bs, **opts).collect()
    assert sorted(r["offset"] for r in rows) == [2, 3, 4]

    opts = replay.offset_options(topic, since=str(ts[6]), partitions=[0, 1, 2])
    rows = read_batch(spark, bs, **opts).collect()
    assert sorted(r["offset"] for r in rows) == [6, 7, 8, 9]

    opts = replay.offset_options(topic, since=str(ts[2]), until=str(ts[4]))
    df = read_batch(spark, bs, **opts)
    assert sorted(r["offset"] for r in df.collect()) == [2, 3]
    latest = replay.transform(df, "latest").collect()
    assert [(r["device_id"], r["temperature"], r["readings"]) for r in latest] == [("dev", 3.0, 2)]


def test_anomaly_alerts_pipeline_writes_commands(spark, module_server, tmp_path) -> None:
    bs = module_server.bootstrap
    topic, commands = "connector-alerts", "connector-commands"
    base = recent_minute_ms()
    items = [(b"hot", json.dumps({"device_id": "hot", "ts": base + i * 10_000, "temperature": 90.0}).encode(), base) for i in range(6)]
    items += [(b"ok", json.dumps({"device_id": "ok", "ts": base, "temperature": 20.0}).encode(), base)]
    produce_timed(bs, topic, items)
    args = anomaly_alerts.build_parser().parse_args([
        "--bootstrap-servers", bs, "--topic", topic, "--commands-topic", commands, "--starting-offsets", "earliest",
        "--checkpoint-dir", str(tmp_path / "ckpt"), "--available-now",
    ])
    assert common.run_queries(spark, [anomaly_alerts.start_query(spark, args)], timeout_s=180) == 0
    got = fetch_records(bs, commands, min_records=1)
    assert {r.key for r in got} == {b"hot"}
    assert all(json.loads(r.value)["command"] == "alert" for r in got)
