"""Schemas shared by the pipelines, the simulator's payloads and the tests.

``KAFKA_SOURCE_SCHEMA`` is exactly what Spark's Kafka source produces (Spark's
``KafkaRecordToRowConverter``: every field nullable, ``headers`` only with
``includeHeaders=true``, a record without headers gets ``null``). Tests build
DataFrames with it, so transformation code cannot tell them from the real source.

The telemetry payload is the JSON a device publishes (``simulate.py`` sends it; the
MQTT bridge passes it through unchanged, with key = device id)::

    {"device_id": "sensor-0003", "ts": 1732222222123, "seq": 17,
     "temperature": 21.37, "humidity": 44.9}

``ts`` is epoch milliseconds (epoch seconds are accepted too: values below 1e11);
without it the record's Kafka timestamp is the event time. ``device_id`` may be left out:
the record key (the bridge's ``{device_id}``) is used. Measurements are doubles; which
ones a pipeline aggregates is a flag (``--metric``), so a device sending a generic
``{"measurement": 3.2}`` works with ``--metric measurement``.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

KAFKA_HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)

KAFKA_SOURCE_SCHEMA_NO_HEADERS = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
)

KAFKA_SOURCE_SCHEMA = StructType(
    [*KAFKA_SOURCE_SCHEMA_NO_HEADERS.fields, StructField("headers", KAFKA_HEADERS_TYPE)]
)

DEFAULT_METRICS: tuple[str, ...] = ("temperature", "humidity")


def telemetry_schema(metrics: Iterable[str] = DEFAULT_METRICS) -> StructType:
    """The JSON payload schema: identity and time fields plus one double per metric."""
    fields = [
        StructField("device_id", StringType()),
        StructField("ts", DoubleType()),  # epoch ms (or s); double so both parse
        StructField("seq", LongType()),
    ]
    seen = {f.name for f in fields}
    for m in metrics:
        if m in seen:
            raise ValueError(f"metric name {m!r} clashes with a payload field")
        seen.add(m)
        fields.append(StructField(m, DoubleType()))
    return StructType(fields)


TELEMETRY_SCHEMA = telemetry_schema()
