"""Alert devices whose readings leave their allowed band: a stream-static join.

    readStream.format("kafka") topic "telemetry"  (streaming readings)
        join (broadcast) thresholds table: device_id or "*", metric, low, high  (static)
    readings outside [low, high] -> one alert per device/metric/direction per minute
    writeStream.format("kafka") topic "commands", key = device id, value = JSON command

The MQTT bridge delivers each ``commands`` record to MQTT ``devices/{key}/commands``,
so the device that ran hot receives ``{"command": "alert", "metric": "temperature",
"kind": "high", "action": "reduce", ...}``.

The thresholds come from ``--thresholds FILE`` (CSV with a header line
``device_id,metric,low,high``; ``*`` as device id is the default row) or the built-in
defaults (temperature -10..60, humidity 5..95).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from spark_examples import common
from spark_examples.schemas import DEFAULT_METRICS
from spark_examples.session import ConnectorError, build_session, require_kafka_source
from spark_examples.transforms import (
    THRESHOLDS_SCHEMA,
    alerts_to_commands,
    detect_anomalies,
    parse_telemetry,
    thresholds_frame,
)

log = logging.getLogger("spark_examples.anomaly_alerts")


def transform(
    kafka_df: DataFrame,
    thresholds: DataFrame,
    *,
    metrics: Sequence[str] = DEFAULT_METRICS,
    watermark: str = "2 minutes",
    dedup_seconds: int = 60,
) -> DataFrame:
    """Kafka source rows + thresholds -> ``commands`` records (key, value). Pure."""
    readings = parse_telemetry(kafka_df, metrics)
    alerts = detect_anomalies(readings, thresholds, metrics, watermark=watermark, dedup_seconds=dedup_seconds)
    return alerts_to_commands(alerts)


def load_thresholds(spark: SparkSession, path: str | None) -> DataFrame:
    """The static table: a CSV file with a header, or the built-in defaults."""
    if not path:
        return thresholds_frame(spark)
    if not Path(path).exists():
        raise SystemExit(f"--thresholds {path}: no such file")
    return spark.read.schema(THRESHOLDS_SCHEMA).option("header", "true").csv(path).cache()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m spark_examples.anomaly_alerts",
        description=(
            "Stream telemetry from the log, join it with a static thresholds table and write "
            "alert commands keyed by device id to the commands topic (the MQTT bridge delivers "
            "them to devices/{device_id}/commands)."
        ),
        epilog=common.CONNECTOR_EPILOG,
    )
    common.add_common_args(p)
    p.add_argument("--topic", default="telemetry", help="input topic (default telemetry)")
    p.add_argument("--commands-topic", default="commands", help="output topic (default commands)")
    p.add_argument("--thresholds", default=None, metavar="CSV", help="device_id,metric,low,high (default: built-in)")
    p.add_argument("--metric", action="append", default=None, help=f"metric to check (repeatable; default {', '.join(DEFAULT_METRICS)})")
    p.add_argument("--watermark", default="2 minutes", help="allowed lateness, bounds the dedup state (default '2 minutes')")
    p.add_argument("--dedup-seconds", type=int, default=60, help="at most one alert per device/metric/kind per this many seconds")
    p.add_argument("--checkpoint-dir", default="spark-output/checkpoints/anomaly_alerts", help="checkpoint directory")
    p.add_argument("--starting-offsets", default="latest", help="earliest, latest or per-partition JSON (first run only; default latest)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--available-now", action="store_true", help="process what the log holds now, then stop")
    g.add_argument("--trigger-interval", default="2 seconds", help="micro-batch interval (default '2 seconds')")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="stop after S seconds (default: run until Ctrl-C)")
    return p


def start_query(spark: SparkSession, args: argparse.Namespace, *, kafka_df: DataFrame | None = None) -> StreamingQuery:
    """The running query; ``kafka_df`` replaces the Kafka source (tests use a file stream)."""
    metrics = args.metric or list(DEFAULT_METRICS)
    if kafka_df is None:
        kafka_df = (
            spark.readStream.format("kafka")
            .options(**common.kafka_options(args))
            .option("subscribe", args.topic)
            .option("startingOffsets", args.starting_offsets)
            .load()
        )
    commands = transform(
        kafka_df, load_thresholds(spark, args.thresholds), metrics=metrics,
        watermark=args.watermark, dedup_seconds=args.dedup_seconds,
    )
    writer = (
        commands.writeStream.queryName("anomaly_commands")
        .format("kafka")
        .outputMode("append")
        .options(**common.kafka_options(args))
        .option("topic", args.commands_topic)
        .option("checkpointLocation", args.checkpoint_dir)
    )
    writer = writer.trigger(availableNow=True) if args.available_now else writer.trigger(processingTime=args.trigger_interval)
    return writer.start()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    common.setup_logging(args.log_level)
    connector = common.connector_from_args(args)
    try:
        spark = build_session(
            "anomaly_alerts", master=args.master, connector=connector, log_level=common.spark_log_level(args.log_level)
        )
        require_kafka_source(spark, connector)
    except ConnectorError as exc:
        log.error("%s", exc)
        return 2
    try:
        query = start_query(spark, args)
        log.info("alerts from %s -> topic %s on %s", args.topic, args.commands_topic, args.bootstrap_servers)
        return common.run_queries(spark, [query], timeout_s=args.timeout)
    finally:
        spark.stop()


if __name__ == "__main__":
    raise SystemExit(main())
