"""The pipelines' logic as pure DataFrame -> DataFrame functions, with no I/O.

Every function here works unchanged on a streaming DataFrame from
``readStream.format("kafka")`` and on a batch DataFrame with the same schema (from
``read.format("kafka")``, or built by the tests from records kafka-python fetched from
logserver), which is what makes the pipelines testable without the connector jars.
Only ANSI-safe expressions are used (Spark 4 turns ANSI mode on by default).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, StringType, StructField, StructType

from .schemas import DEFAULT_METRICS, telemetry_schema

# Timestamps in JSON output: ISO-8601 with an explicit offset ("Z" in a UTC session).
JSON_OPTIONS = {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"}
DEFAULT_DEVICE = "*"  # thresholds row that applies to every device without its own
_CORRUPT = "_corrupt_record"


# --------------------------------------------------------------------------- parsing
def _event_time(ts: Column, fallback: Column) -> Column:
    """Payload ``ts`` (epoch ms, or s when below 1e11) as a timestamp, else ``fallback``."""
    millis = F.when(ts < F.lit(1e11), ts * 1000).otherwise(ts)
    valid = ts.isNotNull() & (ts > 0) & (ts < F.lit(1e14))  # beyond year 5000: garbage
    return F.coalesce(F.when(valid, F.timestamp_millis(F.round(millis).cast("long"))), fallback)


def classify_telemetry(kafka_df: DataFrame, metrics: Sequence[str] = DEFAULT_METRICS) -> DataFrame:
    """Kafka rows -> parsed readings plus an ``error`` column (null when the row is usable).

    Kept separate from ``parse_telemetry`` so a pipeline can route bad records (not JSON,
    no device id, no measurement) somewhere visible instead of dropping them silently.
    """
    schema = StructType([*telemetry_schema(metrics).fields, StructField(_CORRUPT, StringType())])
    text = F.col("value").cast("string")
    # PERMISSIVE parsing fills _corrupt_record with the text of anything that is not JSON.
    p = F.from_json(text, schema, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT})
    has_headers = "headers" in kafka_df.columns
    df = kafka_df.select(
        F.col("key").cast("string").alias("_key"),
        p.alias("_p"),
        text.alias("raw"),
        "topic",
        "partition",
        "offset",
        F.col("timestamp").alias("kafka_timestamp"),
        *([F.col("headers")] if has_headers else []),
    )
    metric_cols = [F.col(f"_p.{m}").alias(m) for m in metrics]
    any_metric = F.lit(False)
    for m in metrics:
        any_metric = any_metric | F.col(f"_p.{m}").isNotNull()
    device = F.coalesce(F.col("_p.device_id"), F.col("_key"))
    error = (
        F.when(F.col("raw").isNull(), F.lit("no value (null record)"))
        .when(F.col("_p").isNull() | F.col(f"_p.{_CORRUPT}").isNotNull(), F.lit("not a JSON object"))
        .when(device.isNull() | (device == ""), F.lit("no device id (payload device_id or record key)"))
        .when(~any_metric, F.lit("no measurement (" + ", ".join(metrics) + ")"))
    )
    return df.select(
        device.alias("device_id"),
        _event_time(F.col("_p.ts"), F.col("kafka_timestamp")).alias("event_time"),
        F.col("_p.seq").alias("seq"),
        *metric_cols,
        "topic",
        "partition",
        "offset",
        "kafka_timestamp",
        *([F.col("headers")] if has_headers else []),
        "raw",
        error.alias("error"),
    )


def parse_telemetry(kafka_df: DataFrame, metrics: Sequence[str] = DEFAULT_METRICS) -> DataFrame:
    """Kafka rows -> one row per valid reading: device_id, event_time, seq, metrics, provenance."""
    return classify_telemetry(kafka_df, metrics).where(F.col("error").isNull()).drop("error", "raw")


def rejected_telemetry(kafka_df: DataFrame, metrics: Sequence[str] = DEFAULT_METRICS) -> DataFrame:
    """The rows ``parse_telemetry`` drops, with the reason and the raw payload text."""
    return classify_telemetry(kafka_df, metrics).where(F.col("error").isNotNull()).select(
        "topic", "partition", "offset", "kafka_timestamp", "device_id", "error", "raw"
    )


def header_value(name: str) -> Column:
    """The first Kafka header called ``name`` as a string (the bridge sets ``mqtt.topic``)."""
    matching = F.filter(F.col("headers"), lambda h: h["key"] == F.lit(name))
    return F.element_at(matching, 1)["value"].cast("string")


# --------------------------------------------------------------------------- aggregates
def windowed_device_stats(
    readings: DataFrame,
    metrics: Sequence[str] = ("temperature",),
    *,
    window: str = "1 minute",
    slide: str | None = None,
    watermark: str = "2 minutes",
) -> DataFrame:
    """Per device and event-time window: reading count and min/max/avg of each metric.

    The watermark bounds the state a stream keeps and decides when a window is final: in
    append mode a window is written once the watermark passes its end, and readings
    older than the watermark are dropped. On a batch DataFrame the watermark is a no-op.
    """
    win = F.window("event_time", window, slide) if slide else F.window("event_time", window)
    aggs: list[Column] = [F.count(F.lit(1)).alias("count")]
    for m in metrics:
        aggs += [
            F.min(m).alias(f"{m}_min"),
            F.max(m).alias(f"{m}_max"),
            F.avg(m).alias(f"{m}_avg"),
        ]
    out_cols = ["count"] + [f"{m}_{s}" for m in metrics for s in ("min", "max", "avg")]
    return (
        readings.withWatermark("event_time", watermark)
        .groupBy(win.alias("window"), F.col("device_id"))
        .agg(*aggs)
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "device_id",
            *out_cols,
        )
    )


def to_kafka_messages(df: DataFrame, key_col: str = "device_id") -> DataFrame:
    """Rows -> the Kafka sink's input: ``key`` (string) and ``value`` (JSON of all columns)."""
    return df.select(
        F.col(key_col).cast("string").alias("key"),
        F.to_json(F.struct(*[F.col(c) for c in df.columns]), JSON_OPTIONS).alias("value"),
    )


# --------------------------------------------------------------------------- anomalies
THRESHOLDS_SCHEMA = StructType(
    [
        StructField("device_id", StringType()),  # "*" = every device without its own row
        StructField("metric", StringType()),
        StructField("low", DoubleType()),
        StructField("high", DoubleType()),
    ]
)

DEFAULT_THRESHOLDS: list[tuple[str, str, float | None, float | None]] = [
    (DEFAULT_DEVICE, "temperature", -10.0, 60.0),
    (DEFAULT_DEVICE, "humidity", 5.0, 95.0),
]


def thresholds_frame(
    spark: SparkSession, rows: Iterable[tuple[str, str, float | None, float | None]] = DEFAULT_THRESHOLDS
) -> DataFrame:
    """The static side of the stream-static join: (device_id or '*', metric, low, high)."""
    return spark.createDataFrame(list(rows), THRESHOLDS_SCHEMA)


def long_readings(readings: DataFrame, metrics: Sequence[str]) -> DataFrame:
    """Wide readings -> one row per (reading, metric) with a non-null value."""
    pairs = F.array(*[F.struct(F.lit(m).alias("metric"), F.col(m).alias("value")) for m in metrics])
    return (
        readings.select("device_id", "event_time", "partition", "offset", F.explode(pairs).alias("m"))
        .select("device_id", "event_time", "partition", "offset", "m.metric", "m.value")
        .where(F.col("value").isNotNull())
    )


def detect_anomalies(
    readings: DataFrame,
    thresholds: DataFrame,
    metrics: Sequence[str] = DEFAULT_METRICS,
    *,
    watermark: str = "2 minutes",
    dedup_seconds: int = 60,
) -> DataFrame:
    """Readings outside their device's (else the default) band, at most one alert per
    device, metric and direction per ``dedup_seconds`` bucket, so a device that stays hot
    gets one command per minute rather than one per reading.

    Stream-static: ``readings`` may be streaming, ``thresholds`` is a small batch table
    (broadcast). Dedup state is bounded by the watermark (dropDuplicatesWithinWatermark).
    """
    own = F.broadcast(
        thresholds.where(F.col("device_id") != DEFAULT_DEVICE).select(
            "device_id", "metric", F.col("low").alias("own_low"), F.col("high").alias("own_high")
        )
    )
    dflt = F.broadcast(
        thresholds.where(F.col("device_id") == DEFAULT_DEVICE).select(
            "metric", F.col("low").alias("dflt_low"), F.col("high").alias("dflt_high")
        )
    )
    joined = (
        long_readings(readings, metrics)
        .join(own, ["device_id", "metric"], "left")
        .join(dflt, ["metric"], "left")
        .withColumn("low", F.coalesce("own_low", "dflt_low"))
        .withColumn("high", F.coalesce("own_high", "dflt_high"))
    )
    kind = F.when(F.col("value") > F.col("high"), F.lit("high")).when(
        F.col("value") < F.col("low"), F.lit("low")
    )
    threshold = F.when(kind == "high", F.col("high")).otherwise(F.col("low"))
    bucket = F.timestamp_seconds(
        F.floor(F.unix_seconds(F.col("event_time")) / F.lit(dedup_seconds)) * F.lit(dedup_seconds)
    )
    alerts = joined.select(
        "device_id",
        "event_time",
        "metric",
        "value",
        kind.alias("kind"),
        threshold.alias("threshold"),
        bucket.alias("bucket"),
        "partition",
        "offset",
    ).where(F.col("kind").isNotNull())
    keys = ["device_id", "metric", "kind", "bucket"]
    alerts = alerts.withWatermark("event_time", watermark)
    # Streams keep dedup state only within the watermark; batch has no such operator.
    deduped = alerts.dropDuplicatesWithinWatermark(keys) if alerts.isStreaming else alerts.dropDuplicates(keys)
    return deduped.drop("bucket")


def alerts_to_commands(alerts: DataFrame) -> DataFrame:
    """Alerts -> records for the ``commands`` topic: key = device id (the bridge delivers
    them to MQTT ``devices/{device_id}/commands``), value = a JSON command."""
    action = F.when(F.col("kind") == "high", F.lit("reduce")).otherwise(F.lit("increase"))
    command = F.struct(
        F.lit("alert").alias("command"),
        F.col("metric"),
        F.col("kind"),
        F.col("value"),
        F.col("threshold"),
        action.alias("action"),
        F.col("event_time"),
        F.concat_ws(":", F.col("partition").cast("string"), F.col("offset").cast("string")).alias("source"),
    )
    return alerts.select(
        F.col("device_id").cast("string").alias("key"), F.to_json(command, JSON_OPTIONS).alias("value")
    )


# --------------------------------------------------------------------------- replay
def latest_per_device(readings: DataFrame) -> DataFrame:
    """The device table rebuilt from the log: each device's last reading (batch only).

    "Last" is the newest event time, ties broken by log position, the way a compacted
    topic keeps the last record per key.
    """
    w = Window.partitionBy("device_id").orderBy(
        F.col("event_time").desc(), F.col("partition").desc(), F.col("offset").desc()
    )
    counts = readings.groupBy("device_id").agg(F.count(F.lit(1)).alias("readings"))
    return (
        readings.withColumn("_rank", F.row_number().over(w))
        .where(F.col("_rank") == 1)
        .drop("_rank")
        .join(counts, "device_id")
        .orderBy("device_id")
    )
