"""The pipelines' transformations on DataFrames with the Kafka source's exact schema,
built from records a real logserver served to kafka-python (no connector jars needed).

One module-scoped data set: simulated devices (as the demo sends them), plus the odd
records the log may hold (a bridge record with MQTT headers, a payload without
device_id, epoch-second timestamps, a null value, text that is not JSON).
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from datetime import datetime

import pytest
from helpers.spark_support import produce, reading
from kafka.partitioner.default import murmur2
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_examples import anomaly_alerts, device_telemetry, replay, simulate
from spark_examples.kafkaframe import fetch_records, records_to_frame
from spark_examples.schemas import KAFKA_SOURCE_SCHEMA, KAFKA_SOURCE_SCHEMA_NO_HEADERS
from spark_examples.transforms import (
    classify_telemetry,
    header_value,
    parse_telemetry,
    rejected_telemetry,
    thresholds_frame,
    to_kafka_messages,
    windowed_device_stats,
)

TOPIC = "spark-transforms-telemetry"
END_MS = 1_800_000_000_000  # fixed event times: deterministic windows
DEVICES, MESSAGES, STEP_MS = 4, 40, 5000


@pytest.fixture(scope="module")
def data(module_server, spark):
    """(records from the log, DataFrame of them, the simulated readings sent)."""
    bs = module_server.bootstrap
    sent = list(simulate.generate(DEVICES, MESSAGES, step_ms=STEP_MS, end_ms=END_MS, seed=3, anomaly_rate=0.05, malformed=2))
    extra = [
        # what the MQTT bridge writes: key = device id, MQTT topic and client id as headers
        (b"bridge-dev", reading("bridge-dev", END_MS - 1000, 20.5), [("mqtt.topic", b"devices/bridge-dev/telemetry"), ("mqtt.client_id", b"bridge-dev")]),
        # no device_id in the payload: the key names the device; epoch seconds
        (b"keyed-dev", json.dumps({"ts": (END_MS - 2000) / 1000, "temperature": 19.0}).encode(), None),
        (b"keyed-dev", None, None),  # null value (a tombstone)
        (None, b"[1, 2, 3]", None),  # JSON, but not an object, and no key
        (b"quiet-dev", json.dumps({"device_id": "quiet-dev", "ts": END_MS}).encode(), None),  # no measurement
    ]
    produce(bs, TOPIC, [(r.device_id.encode(), r.payload, None) for r in sent] + extra)
    records = fetch_records(bs, TOPIC, min_records=len(sent) + len(extra))
    df = records_to_frame(spark, records).cache()
    return records, df, sent


def java_partition(key: bytes, partitions: int) -> int:
    """The Java client's default partition for a key (murmur2, positive, modulo)."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def valid_bodies(sent) -> list[dict]:
    return [json.loads(r.payload) for r in sent if r.payload.startswith(b"{")]


def rows(df: DataFrame) -> list[dict]:
    return [r.asDict() for r in df.collect()]


# --------------------------------------------------------------------------- the frame
def test_frame_is_exactly_what_the_kafka_source_yields(data, spark) -> None:
    records, df, _ = data
    assert df.schema == KAFKA_SOURCE_SCHEMA
    assert records_to_frame(spark, records[:3], include_headers=False).schema == KAFKA_SOURCE_SCHEMA_NO_HEADERS
    got = {(r["partition"], r["offset"]): r for r in rows(df.withColumn("ts_ms", F.unix_millis("timestamp")))}
    assert len(got) == len(records)
    assert {r.partition for r in records} == {0, 1, 2}, "module_server topics have 3 partitions"
    for rec in records:
        row = got[(rec.partition, rec.offset)]
        assert row["key"] == (bytearray(rec.key) if rec.key is not None else None)
        assert row["value"] == (bytearray(rec.value) if rec.value is not None else None)
        assert row["topic"] == TOPIC
        assert row["ts_ms"] == rec.timestamp
        assert row["timestampType"] == rec.timestamp_type == 0  # CreateTime
        if rec.headers:
            assert [(h["key"], bytes(h["value"])) for h in row["headers"]] == list(rec.headers)
        else:
            assert row["headers"] is None  # as Spark's source: no headers -> null


def test_partitioning_matches_kafka_default_partitioner(data) -> None:
    """Keys land where Java/kafka-python's murmur2 partitioner puts them (the bridge too)."""
    records, _, _ = data
    for rec in records:
        if rec.key is not None:
            assert rec.partition == java_partition(rec.key, 3), rec.key


# --------------------------------------------------------------------------- parsing
def test_parse_telemetry_keeps_every_valid_reading(data) -> None:
    _, df, sent = data
    readings = parse_telemetry(df)
    got = rows(readings.withColumn("ms", F.unix_millis("event_time")))
    bodies = valid_bodies(sent)
    assert len(got) == len(bodies) + 2  # + the bridge record and the key-only record
    by_pos = {(r["device_id"], r["seq"]): r for r in got if r["seq"] is not None}
    for b in bodies:
        r = by_pos[(b["device_id"], b["seq"])]
        assert r["ms"] == b["ts"]
        assert r["temperature"] == pytest.approx(b["temperature"])
        assert r["humidity"] == pytest.approx(b["humidity"])
    keyed = [r for r in got if r["device_id"] == "keyed-dev"]
    assert len(keyed) == 1 and keyed[0]["ms"] == END_MS - 2000, "epoch seconds are accepted"
    assert readings.columns[:5] == ["device_id", "event_time", "seq", "temperature", "humidity"]


def test_rejected_records_say_why(data) -> None:
    _, df, sent = data
    bad = rows(rejected_telemetry(df))
    reasons = [(r["device_id"], r["error"]) for r in bad]
    for r in sent:
        if not r.payload.startswith(b"{"):
            assert (r.device_id, "not a JSON object") in reasons
            assert any(b["raw"] == r.payload.decode() for b in bad), "the raw text is kept"
    assert ("keyed-dev", "no value (null record)") in reasons
    assert (None, "not a JSON object") in reasons or (None, "no device id (payload device_id or record key)") in reasons
    assert ("quiet-dev", "no measurement (temperature, humidity)") in reasons
    assert len(bad) == 5
    total = classify_telemetry(df).count()
    assert total == df.count()


def test_bridge_headers_are_readable(data) -> None:
    _, df, _ = data
    got = rows(parse_telemetry(df).where(F.col("device_id") == "bridge-dev").select(header_value("mqtt.topic").alias("t")))
    assert got == [{"t": "devices/bridge-dev/telemetry"}]


# --------------------------------------------------------------------------- aggregates
def expected_stats(bodies: list[dict], window_ms: int = 60_000) -> dict:
    groups: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for b in bodies:
        groups[(b["device_id"], b["ts"] // window_ms * window_ms)].append(b)
    return groups


def test_windowed_stats_match_a_plain_python_computation(data) -> None:
    _, df, sent = data
    stats = device_telemetry.transform(df.where(F.col("key").cast("string").startswith("sensor-")))
    got = rows(stats.withColumn("ws", F.unix_millis("window_start")).withColumn("we", F.unix_millis("window_end")))
    want = expected_stats(valid_bodies(sent))
    assert {(r["device_id"], r["ws"]) for r in got} == set(want)
    for r in got:
        group = want[(r["device_id"], r["ws"])]
        assert r["we"] - r["ws"] == 60_000
        assert r["count"] == len(group)
        for m in ("temperature", "humidity"):
            vals = [b[m] for b in group]
            assert r[f"{m}_min"] == pytest.approx(min(vals))
            assert r[f"{m}_max"] == pytest.approx(max(vals))
            assert r[f"{m}_avg"] == pytest.approx(statistics.fmean(vals))


def test_sliding_windows_count_each_reading_in_every_window_it_falls_in(data) -> None:
    _, df, sent = data
    readings = parse_telemetry(df).where(F.col("device_id").startswith("sensor-"))
    stats = windowed_device_stats(readings, ["temperature"], window="2 minutes", slide="1 minute")
    assert stats.agg(F.sum("count")).first()[0] == 2 * len(valid_bodies(sent))
    assert stats.columns == ["window_start", "window_end", "device_id", "count", "temperature_min", "temperature_max", "temperature_avg"]


def test_aggregates_become_kafka_messages_keyed_by_device(data) -> None:
    _, df, _ = data
    msgs = to_kafka_messages(device_telemetry.transform(df))
    assert [f.name for f in msgs.schema.fields] == ["key", "value"]
    for r in msgs.collect():
        body = json.loads(r["value"])
        assert body["device_id"] == r["key"]
        assert body["window_start"].endswith("Z") and body["count"] >= 1


def test_generic_measurement_metric(spark) -> None:
    """A device sending {"measurement": x} works with metrics=["measurement"]."""
    from types import SimpleNamespace as Rec

    recs = [
        Rec(key=b"m1", value=json.dumps({"ts": END_MS + i * 1000, "measurement": float(i)}).encode(), topic="t",
            partition=0, offset=i, timestamp=END_MS, timestamp_type=0, headers=[])
        for i in range(5)
    ]
    stats = rows(device_telemetry.transform(records_to_frame(spark, recs), metrics=["measurement"]))
    assert len(stats) == 1 and stats[0]["count"] == 5 and stats[0]["measurement_max"] == 4.0


# --------------------------------------------------------------------------- anomalies
def test_alert_commands_one_per_device_metric_kind_and_minute(data, spark, module_server) -> None:
    _, df, sent = data
    thresholds = thresholds_frame(spark, [("*", "temperature", -10.0, 60.0), ("*", "humidity", 5.0, 95.0), ("sensor-0002", "temperature", 0.0, 20.0)])
    commands = anomaly_alerts.transform(df, thresholds)
    got = [(r["key"], json.loads(r["value"])) for r in commands.collect()]

    want: set[tuple] = set()
    for b in valid_bodies(sent):
        high = 20.0 if b["device_id"] == "sensor-0002" else 60.0
        low = 0.0 if b["device_id"] == "sensor-0002" else -10.0
        t = b["temperature"]
        kind = "high" if t > high else "low" if t < low else None
        if kind:
            want.add((b["device_id"], "temperature", kind, b["ts"] // 60_000))
    assert want, "the data set has anomalies (overheating readings, sensor-0002's tight band)"
    have = set()
    for key, body in got:
        assert body["command"] == "alert" and key
        assert body["action"] == ("reduce" if body["kind"] == "high" else "increase")
        ms = int(datetime.fromisoformat(body["event_time"].replace("Z", "+00:00")).timestamp() * 1000)
        have.add((key, body["metric"], body["kind"], ms // 60_000))
    assert len(have) == len(got), "at most one alert per device, metric, kind and minute"
    assert have == want

    # Written to a commands topic the way the Spark sink writes (key = device id), they land
    # in the partition the bridge's downlink expects for that device.
    topic = "spark-transforms-commands"
    produce(module_server.bootstrap, topic, [(k.encode(), json.dumps(v).encode(), None) for k, v in got])
    back = fetch_records(module_server.bootstrap, topic, min_records=len(got))
    assert sorted(r.key.decode() for r in back) == sorted(k for k, _ in got)
    assert all(r.partition == java_partition(r.key, 3) for r in back)


# --------------------------------------------------------------------------- replay
def test_replay_rebuilds_the_device_table(data) -> None:
    _, df, sent = data
    table = rows(replay.transform(df, "latest").withColumn("ms", F.unix_millis("event_time")))
    last: dict[str, dict] = {}
    counts: dict[str, int] = defaultdict(int)
    for b in valid_bodies(sent):
        counts[b["device_id"]] += 1
        if b["device_id"] not in last or b["ts"] >= last[b["device_id"]]["ts"]:
            last[b["device_id"]] = b
    sensors = [r for r in table if r["device_id"].startswith("sensor-")]
    assert [r["device_id"] for r in sensors] == sorted(last)
    for r in sensors:
        b = last[r["device_id"]]
        assert (r["ms"], r["seq"], r["readings"]) == (b["ts"], b["seq"], counts[r["device_id"]])
    assert replay.transform(df, "readings").count() == len(valid_bodies(sent)) + 2
    assert replay.transform(df, "stats").count() == len(expected_stats(valid_bodies(sent))) + 2
    with pytest.raises(ValueError):
        replay.transform(df, "nope")


# --------------------------------------------------------------------------- ANSI mode
def test_transformations_are_ansi_safe(data, spark) -> None:
    """Spark 4 runs with ANSI mode on: the same code must not raise there."""
    _, df, _ = data
    before = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        assert device_telemetry.transform(df).count() > 0
        assert anomaly_alerts.transform(df, thresholds_frame(spark)).count() > 0
        assert rejected_telemetry(df).count() == 5
        assert replay.transform(df, "latest").count() > 0
    finally:
        spark.conf.set("spark.sql.ansi.enabled", before)
