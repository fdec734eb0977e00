"""Per-device telemetry aggregates, streamed from the log with Spark's Kafka source.

    readStream.format("kafka")  topic "telemetry" (written by the MQTT bridge:
        |                        key = device id, value = the device's JSON payload)
    parse JSON, event time = payload ts (else the record timestamp)
    watermark + event-time windows, per device: count, min/max/avg per metric
        |-> Parquet files (append; a window is written once the watermark closes it)
        '-> writeStream.format("kafka") topic "telemetry-aggregates" (key = device id, JSON)

Each sink is its own streaming query with its own checkpoint directory under
``--checkpoint-dir``, so restarting the command resumes where it stopped (exactly-once
into Parquet, at-least-once into Kafka, as Spark documents for these sinks).

Run: ``python -m spark_examples.device_telemetry --bootstrap-servers 127.0.0.1:9092`` or
``spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.9
spark_examples/device_telemetry.py`` (the repository root on PYTHONPATH or installed;
coordinates for pyspark 3.5.9, ``python -m spark_examples.session`` prints the installed one's).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from spark_examples import common
from spark_examples.schemas import DEFAULT_METRICS
from spark_examples.session import ConnectorError, build_session, require_kafka_source
from spark_examples.transforms import (
    parse_telemetry,
    rejected_telemetry,
    to_kafka_messages,
    windowed_device_stats,
)

log = logging.getLogger("spark_examples.device_telemetry")


def transform(
    kafka_df: DataFrame,
    *,
    metrics: Sequence[str] = DEFAULT_METRICS,
    window: str = "1 minute",
    slide: str | None = None,
    watermark: str = "2 minutes",
) -> DataFrame:
    """Kafka source rows -> windowed per-device stats (pure: no I/O, stream or batch)."""
    readings = parse_telemetry(kafka_df, metrics)
    return windowed_device_stats(readings, metrics, window=window, slide=slide, watermark=watermark)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m spark_examples.device_telemetry",
        description=(
            "Stream device telemetry from the log (Spark's Kafka source), aggregate per device "
            "over event-time windows with a watermark, write the aggregates to Parquet and to "
            "a Kafka topic."
        ),
        epilog=common.CONNECTOR_EPILOG,
    )
    common.add_common_args(p)
    p.add_argument("--topic", default="telemetry", help="input topic (default telemetry)")
    p.add_argument("--output-topic", default="telemetry-aggregates", help="aggregates topic (default telemetry-aggregates)")
    p.add_argument("--rejected-topic", default=None, metavar="TOPIC", help="also write unparsable records here (default: off)")
    p.add_argument("--output-dir", default="spark-output/telemetry-aggregates", help="Parquet directory")
    p.add_argument("--checkpoint-dir", default="spark-output/checkpoints/device_telemetry", help="checkpoints (one subdirectory per sink)")
    p.add_argument(
        "--metric",
        action="append",
        default=None,
        help=f"payload field to aggregate (repeatable; default {', '.join(DEFAULT_METRICS)})",
    )
    p.add_argument("--window", default="1 minute", help="window length (default '1 minute')")
    p.add_argument("--slide", default=None, help="slide for sliding windows (default: tumbling)")
    p.add_argument("--watermark", default="2 minutes", help="allowed lateness (default '2 minutes')")
    p.add_argument("--starting-offsets", default="earliest", help="earliest, latest or per-partition JSON (first run only)")
    p.add_argument("--max-offsets-per-trigger", type=int, default=None, metavar="N", help="rate limit per micro-batch")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--available-now", action="store_true", help="process what the log holds now, then stop")
    g.add_argument("--trigger-interval", default="10 seconds", help="micro-batch interval (default '10 seconds')")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="stop after S seconds (default: run until Ctrl-C)")
    return p


def source(spark: SparkSession, args: argparse.Namespace) -> DataFrame:
    reader = (
        spark.readStream.format("kafka")
        .options(**common.kafka_options(args))
        .option("subscribe", args.topic)
        .option("startingOffsets", args.starting_offsets)
        .option("includeHeaders", "true")
    )
    if args.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    return reader.load()


def start_queries(
    spark: SparkSession,
    args: argparse.Namespace,
    *,
    kafka_df: DataFrame | None = None,
    sinks: Sequence[str] = ("parquet", "kafka"),
) -> list[StreamingQuery]:
    """The sinks (Parquet, Kafka, optional rejected records) as running streaming queries.

    ``kafka_df`` replaces the Kafka source with any stream of the same schema (the tests
    use a file stream); ``sinks`` picks which of the two main sinks to start.
    """
    metrics = args.metric or list(DEFAULT_METRICS)
    kafka_df = kafka_df if kafka_df is not None else source(spark, args)
    stats = transform(kafka_df, metrics=metrics, window=args.window, slide=args.slide, watermark=args.watermark)
    ckpt = Path(args.checkpoint_dir)

    def trig(w: DataStreamWriter) -> DataStreamWriter:
        return w.trigger(availableNow=True) if args.available_now else w.trigger(processingTime=args.trigger_interval)

    queries: list[StreamingQuery] = []
    if "parquet" in sinks:
        queries.append(
            trig(
                stats.writeStream.queryName("telemetry_parquet")
                .format("parquet")
                .outputMode("append")
                .option("path", args.output_dir)
                .option("checkpointLocation", str(ckpt / "parquet"))
            ).start()
        )
    if "kafka" in sinks:
        queries.append(
            trig(
                to_kafka_messages(stats)
                .writeStream.queryName("telemetry_kafka")
                .format("kafka")
                .outputMode("append")
                .options(**common.kafka_options(args))
                .option("topic", args.output_topic)
                .option("checkpointLocation", str(ckpt / "kafka"))
            ).start()
        )
    if args.rejected_topic and "kafka" in sinks:
        bad = rejected_telemetry(kafka_df, metrics)
        queries.append(
            trig(
                to_kafka_messages(bad, key_col="device_id")
                .writeStream.queryName("telemetry_rejected")
                .format("kafka")
                .options(**common.kafka_options(args))
                .option("topic", args.rejected_topic)
                .option("checkpointLocation", str(ckpt / "rejected"))
            ).start()
        )
    return queries


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    common.setup_logging(args.log_level)
    connector = common.connector_from_args(args)
    try:
        spark = build_session(
            "device_telemetry", master=args.master, connector=connector, log_level=common.spark_log_level(args.log_level)
        )
        require_kafka_source(spark, connector)
    except ConnectorError as exc:
        log.error("%s", exc)
        return 2
    try:
        queries = start_queries(spark, args)
        log.info(
            "reading %s from %s; aggregates -> %s and topic %s",
            args.topic, args.bootstrap_servers, args.output_dir, args.output_topic,
        )
        return common.run_queries(spark, queries, timeout_s=args.timeout)
    finally:
        spark.stop()


if __name__ == "__main__":
    raise SystemExit(main())
