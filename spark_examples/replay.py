"""Rebuild a table from the log: a batch ``read.format("kafka")`` over an offset range.

The log is the source of truth; any table derived from it can be thrown away and
rebuilt by reading a range of it again. The range is given the ways Spark's Kafka
source takes it:

- offsets: ``--starting-offsets earliest`` / ``--ending-offsets latest`` (defaults) or
  JSON per partition, e.g. ``'{"telemetry": {"0": 120, "1": -2}}'`` (-2 = earliest,
  -1 = latest); ``--partition-offsets 0=120:500 --partition-offsets 1=0:`` builds it;
- time: ``--since 2026-11-21T10:00:00Z --until 2026-11-21T11:00:00Z`` (or epoch ms):
  every partition from the first record at/after ``since`` up to the first at/after
  ``until`` (``startingOffsetsByTimestamp``/``endingOffsetsByTimestamp`` JSON, per
  partition with ``--partitions``, else Spark's global ``startingTimestamp``);
  ``--starting-offsets-by-timestamp JSON`` passes per-partition times as they are.

A range that names partitions reads exactly those (``assign``): Spark's Kafka source
refuses per-partition offsets or times that leave out any partition it reads, so
``subscribe`` (every partition) works only when all of them are named.

Tables (``--table``): ``latest`` (default, each device's last reading: the device
state table), ``readings`` (every parsed reading) or ``stats`` (windowed aggregates, as
device_telemetry computes them). Written to Parquet (overwrite) and shown.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Sequence
from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession

from spark_examples import common
from spark_examples.schemas import DEFAULT_METRICS
from spark_examples.session import ConnectorError, build_session, require_kafka_source
from spark_examples.transforms import latest_per_device, parse_telemetry, windowed_device_stats

log = logging.getLogger("spark_examples.replay")

TABLES = ("latest", "readings", "stats")


# --------------------------------------------------------------------------- options (pure)
def parse_time_ms(text: str) -> int:
    """'1732222222123' (epoch ms) or ISO-8601 ('2026-11-21T10:00:00Z'; naive = UTC) -> ms."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"{text!r}: not epoch milliseconds nor an ISO-8601 time") from exc
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def partition_offsets_json(topic: str, ranges: Sequence[str]) -> tuple[str, str]:
    """``['0=120:500', '1=:']`` -> (startingOffsets JSON, endingOffsets JSON).

    Empty start = earliest (-2), empty end = latest (-1); partitions not named are not read.
    """
    start: dict[str, int] = {}
    end: dict[str, int] = {}
    for item in ranges:
        part, sep, rng = item.partition("=")
        lo, sep2, hi = rng.partition(":")
        if not sep or not sep2 or not part.strip().isdigit():
            raise ValueError(f"{item!r}: expected PARTITION=START:END, e.g. 0=120:500 or 1=:")
        p = str(int(part))
        start[p] = int(lo) if lo.strip() else -2
        end[p] = int(hi) if hi.strip() else -1
        if start[p] < -2 or end[p] < -1 or (end[p] >= 0 and start[p] >= 0 and end[p] < start[p]):
            raise ValueError(f"{item!r}: bad range")
    return json.dumps({topic: start}), json.dumps({topic: end})


def offset_options(
    topic: str,
    *,
    starting_offsets: str = "earliest",
    ending_offsets: str = "latest",
    partition_offsets: Sequence[str] = (),
    since: str | None = None,
    until: str | None = None,
    partitions: Sequence[int] | None = None,
    starting_by_timestamp: str | None = None,
    ending_by_timestamp: str | None = None,
) -> dict[str, str]:
    """The Kafka source options for one batch read of ``topic`` (validated here, so a bad
    range fails before Spark starts). Time bounds win over offsets, as in Spark."""
    opts: dict[str, str] = {"subscribe": topic}
    if partition_offsets:
        starting_offsets, ending_offsets = partition_offsets_json(topic, partition_offsets)
    if starting_offsets == "latest":
        raise ValueError("startingOffsets=latest reads nothing in a batch query")
    if ending_offsets == "earliest":
        raise ValueError("endingOffsets=earliest is not allowed in a batch query")
    for name, value in (("startingOffsets", starting_offsets), ("endingOffsets", ending_offsets)):
        if value not in ("earliest", "latest"):
            try:
                parsed = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{name}: not earliest/latest nor JSON: {value!r}") from exc
            if not isinstance(parsed, dict) or not all(isinstance(v, dict) for v in parsed.values()):
                raise ValueError(f'{name}: expected {{"topic": {{"partition": offset}}}}, got {value!r}')
        opts[name] = value
    if since is not None:
        ms = parse_time_ms(since)
        if partitions:
            opts["startingOffsetsByTimestamp"] = json.dumps({topic: {str(p): ms for p in partitions}})
        else:
            opts["startingTimestamp"] = str(ms)
    if until is not None:
        ms = parse_time_ms(until)
        if partitions:
            opts["endingOffsetsByTimestamp"] = json.dumps({topic: {str(p): ms for p in partitions}})
        else:
            opts["endingTimestamp"] = str(ms)
    if since is not None and until is not None and parse_time_ms(until) < parse_time_ms(since):
        raise ValueError("--until is before --since")
    if starting_by_timestamp:
        json.loads(starting_by_timestamp)
        opts["startingOffsetsByTimestamp"] = starting_by_timestamp
    if ending_by_timestamp:
        json.loads(ending_by_timestamp)
        opts["endingOffsetsByTimestamp"] = ending_by_timestamp
    if any(k.endswith("Timestamp") for k in opts):
        # A time after the last record: start at the end instead of failing the query.
        opts["startingOffsetsByTimestampStrategy"] = "latest"
    named = named_partitions(opts)
    if named:
        del opts["subscribe"]
        opts["assign"] = json.dumps(named)
    return opts


PER_PARTITION_OPTIONS = ("startingOffsets", "endingOffsets", "startingOffsetsByTimestamp", "endingOffsetsByTimestamp")


def named_partitions(opts: dict[str, str]) -> dict[str, list[int]]:
    """Topic -> partitions named by the per-partition options (empty: none are), checked
    to agree, since Spark asks each of them to cover every partition it reads."""
    named: dict[str, list[int]] = {}
    for name in PER_PARTITION_OPTIONS:
        value = opts.get(name)
        if value is None or value in ("earliest", "latest"):
            continue
        parts = {t: sorted(int(p) for p in ps) for t, ps in json.loads(value).items()}
        if named and parts != named:
            raise ValueError(f"{name} names partitions {parts}, another option names {named}: they must agree")
        named = parts
    return named


# --------------------------------------------------------------------------- transform (pure)
def transform(
    kafka_df: DataFrame,
    table: str = "latest",
    *,
    metrics: Sequence[str] = DEFAULT_METRICS,
    window: str = "1 minute",
) -> DataFrame:
    """Kafka source rows (batch) -> the requested table."""
    readings = parse_telemetry(kafka_df, metrics)
    if table == "readings":
        return readings.drop("headers")
    if table == "latest":
        return latest_per_device(readings.drop("headers"))
    if table == "stats":
        return windowed_device_stats(readings, metrics, window=window).orderBy("device_id", "window_start")
    raise ValueError(f"unknown table {table!r} (one of {', '.join(TABLES)})")


# --------------------------------------------------------------------------- CLI
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m spark_examples.replay",
        description="Rebuild a table from a range of the log with a batch read.format('kafka').",
        epilog=common.CONNECTOR_EPILOG,
    )
    common.add_common_args(p)
    p.add_argument("--topic", default="telemetry", help="topic to replay (default telemetry)")
    p.add_argument("--table", choices=TABLES, default="latest", help="table to rebuild (default latest)")
    p.add_argument("--metric", action="append", default=None, help=f"payload metric (repeatable; default {', '.join(DEFAULT_METRICS)})")
    p.add_argument("--window", default="1 minute", help="window for --table stats")
    r = p.add_argument_group("range (Spark's startingOffsets / endingOffsets)")
    r.add_argument("--starting-offsets", default="earliest", help="earliest or JSON per partition")
    r.add_argument("--ending-offsets", default="latest", help="latest or JSON per partition")
    r.add_argument("--partition-offsets", action="append", default=[], metavar="P=START:END", help="per-partition range, builds the JSON (repeatable)")
    r.add_argument("--since", metavar="TIME", help="from the first record at/after TIME (ISO-8601 or epoch ms)")
    r.add_argument("--until", metavar="TIME", help="up to the first record at/after TIME")
    r.add_argument("--partitions", metavar="0,1,...", help="with --since/--until: per-partition timestamp JSON for these")
    r.add_argument("--starting-offsets-by-timestamp", metavar="JSON", help='{"topic": {"partition": epoch_ms}}')
    r.add_argument("--ending-offsets-by-timestamp", metavar="JSON", help='{"topic": {"partition": epoch_ms}}')
    p.add_argument("--output-dir", default=None, help="write the table as Parquet here (overwrite)")
    p.add_argument("--show", type=int, default=20, metavar="N", help="rows to print (default 20, 0 = none)")
    return p


def read_range(spark: SparkSession, args: argparse.Namespace, opts: dict[str, str]) -> DataFrame:
    return (
        spark.read.format("kafka")
        .options(**common.kafka_options(args))
        .options(**opts)
        .option("includeHeaders", "true")
        .load()
    )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    common.setup_logging(args.log_level)
    try:
        parts = [int(x) for x in args.partitions.split(",")] if args.partitions else None
        opts = offset_options(
            args.topic,
            starting_offsets=args.starting_offsets,
            ending_offsets=args.ending_offsets,
            partition_offsets=args.partition_offsets,
            since=args.since,
            until=args.until,
            partitions=parts,
            starting_by_timestamp=args.starting_offsets_by_timestamp,
            ending_by_timestamp=args.ending_offsets_by_timestamp,
        )
    except ValueError as exc:
        parser.error(str(exc))
    connector = common.connector_from_args(args)
    try:
        spark = build_session(
            "replay", master=args.master, connector=connector, log_level=common.spark_log_level(args.log_level)
        )
        require_kafka_source(spark, connector)
    except ConnectorError as exc:
        log.error("%s", exc)
        return 2
    try:
        log.info("replaying %s with %s", args.topic, opts)
        table = transform(read_range(spark, args, opts), args.table, metrics=args.metric or list(DEFAULT_METRICS), window=args.window)
        table = table.cache()
        n = table.count()
        log.info("table %s: %d rows", args.table, n)
        if args.output_dir:
            table.write.mode("overwrite").parquet(args.output_dir)
            log.info("written to %s", args.output_dir)
        if args.show:
            table.show(args.show, truncate=False)
        return 0
    finally:
        spark.stop()


if __name__ == "__main__":
    raise SystemExit(main())
