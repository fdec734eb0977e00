"""The streaming side of the pipelines on Spark's real streaming engine, without the
Kafka connector: records served by logserver (fetched with kafka-python) are written as
Parquet files with the Kafka source's schema and read back with ``readStream``, so the
watermark, windows, append output, checkpoint restart and streaming dedup run exactly as
they do behind ``readStream.format("kafka")``.
"""

from __future__ import annotations

import json

import pytest
from helpers.spark_support import BASE, MIN, LogToFiles, await_all, reading, windows

from spark_examples import anomaly_alerts, device_telemetry
from spark_examples.transforms import thresholds_frame


def test_device_telemetry_stream_emits_closed_windows_drops_late_data_and_resumes(spark, module_server, tmp_path) -> None:
    log = LogToFiles(spark, module_server.bootstrap, "spark-stream-telemetry", tmp_path / "in")
    out, ckpt = tmp_path / "aggregates", tmp_path / "checkpoints"
    args = device_telemetry.build_parser().parse_args([
        "--output-dir", str(out), "--checkpoint-dir", str(ckpt), "--available-now",
        "--metric", "temperature", "--window", "1 minute", "--watermark", "2 minutes",
    ])
    # Two devices, a reading every 10 s for 5 minutes: event times BASE .. BASE+290s.
    first = [(d, reading(d, BASE + i * 10_000, temperature=20.0 + i + (5 if d == "d2" else 0))) for i in range(30) for d in ("d1", "d2")]
    assert log.append(first) == 60

    await_all(device_telemetry.start_queries(spark, args, kafka_df=log.stream(), sinks=("parquet",)))
    got = windows(spark, out)
    # watermark = max event time - 2 min = BASE+170s: only windows ending by then are final
    assert sorted(got) == [("d1", BASE), ("d1", BASE + MIN), ("d2", BASE), ("d2", BASE + MIN)]
    w0 = got[("d1", BASE)]
    assert (w0["count"], w0["temperature_min"], w0["temperature_max"], w0["temperature_avg"]) == (6, 20.0, 25.0, 22.5)
    assert got[("d2", BASE + MIN)]["temperature_avg"] == pytest.approx(33.5)

    # A late reading for the first window (behind the watermark) and one 10 minutes on.
    second = [("d1", reading("d1", BASE + 5_000, temperature=99.0)), ("d2", reading("d2", BASE + 10 * MIN, temperature=1.0))]
    assert log.append(second) == 2
    # Restart from the checkpoint with a new query, as a re-run of the command would.
    await_all(device_telemetry.start_queries(spark, args, kafka_df=log.stream(), sinks=("parquet",)))
    got = windows(spark, out)
    # watermark now BASE+8min: all five windows of each device are final, nothing twice
    assert sorted(got) == sorted((d, BASE + k * MIN) for d in ("d1", "d2") for k in range(5))
    assert got[("d1", BASE)]["count"] == 6 and got[("d1", BASE)]["temperature_max"] == 25.0, "late reading dropped"
    assert spark.read.parquet(str(out)).count() == 10
    assert (ckpt / "parquet" / "offsets").is_dir()


def test_anomaly_alerts_stream_dedups_within_the_watermark(spark, module_server, tmp_path) -> None:
    log = LogToFiles(spark, module_server.bootstrap, "spark-stream-alerts", tmp_path / "in")
    # d1 runs hot for 3 minutes (a reading every 10 s), d2 stays normal, d3 freezes once.
    payloads = [("d1", reading("d1", BASE + i * 10_000, temperature=90.0 + i / 10)) for i in range(18)]
    payloads += [("d2", reading("d2", BASE + i * 10_000, temperature=21.0)) for i in range(18)]
    payloads += [("d3", reading("d3", BASE + 30_000, temperature=-40.0, humidity=50.0))]
    log.append(payloads)
    stream = log.stream()
    assert stream.isStreaming
    commands = anomaly_alerts.transform(stream, thresholds_frame(spark))
    q = (
        commands.writeStream.format("memory").queryName("alerts_under_test").outputMode("append")
        .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start()
    )
    await_all([q])
    got = [(r["key"], json.loads(r["value"])) for r in spark.table("alerts_under_test").collect()]
    per_device: dict[str, list[dict]] = {}
    for key, body in got:
        per_device.setdefault(key, []).append(body)
    assert sorted(per_device) == ["d1", "d3"]
    assert len(per_device["d1"]) == 3, "one alert per minute while d1 stays hot"
    assert {b["kind"] for b in per_device["d1"]} == {"high"} and {b["action"] for b in per_device["d1"]} == {"reduce"}
    assert per_device["d3"][0]["kind"] == "low" and per_device["d3"][0]["threshold"] == -10.0
