"""Exactly once from a transactional producer to Parquet through the log.

Two halves, each a subcommand:

- ``produce``: a transactional producer (kafka-python, ``transactional_id``) writes
  ``--transactions`` transactions of ``--records`` records each to ``--topic``; every
  ``--abort-every``-th transaction is aborted instead of committed. Record values are
  ``txn-<T>-<R>``, so the output can be checked: the committed ones exactly once, no
  aborted one.
- ``stream``: a Structured Streaming job reading the topic with
  ``kafka.isolation.level=read_committed`` (Spark's Kafka source then never returns a
  record of an aborted or still open transaction) and appending topic, partition,
  offset, key and value to Parquet, with a checkpoint. Spark's file sink commits each
  micro-batch's files in ``<output>/_spark_metadata`` after writing them, and the
  checkpoint records the offsets of each micro-batch before it runs: a job killed at
  any point and started again with the same checkpoint rewrites the unfinished batch
  from the same offsets, and readers of the directory (``spark.read.parquet``) see only
  committed batches. Together: every committed record once, none aborted, through
  broker failovers (the log keeps the acknowledged transactions, see docs/cluster.md)
  and job restarts.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from spark_examples import common
from spark_examples.session import ConnectorError, build_session, require_kafka_source

log = logging.getLogger("spark_examples.exactly_once")

COLUMNS = ("topic", "partition", "offset", "key", "value")
TRANSACTIONAL_ID = "exactly-once-example"


def value(transaction: int, record: int) -> str:
    """The value of record ``record`` of transaction ``transaction``."""
    return f"txn-{transaction}-{record}"


def committed(transaction: int, abort_every: int) -> bool:
    """Whether ``produce`` commits transaction ``transaction`` (else it aborts it)."""
    return abort_every <= 0 or (transaction + 1) % abort_every != 0


def produce(bootstrap: str, topic: str, transactions: int, records: int, abort_every: int,
            transactional_id: str = TRANSACTIONAL_ID, first: int = 0) -> tuple[int, int]:
    """Write the transactions (numbered from ``first``); (committed, aborted) counts."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id,
                             linger_ms=5)
    done = [0, 0]
    try:
        producer.init_transactions()
        for t in range(first, first + transactions):
            producer.begin_transaction()
            for r in range(records):
                producer.send(topic, key=str(r).encode(), value=value(t, r).encode())
            if committed(t, abort_every):
                producer.commit_transaction()
                done[0] += 1
            else:
                producer.abort_transaction()
                done[1] += 1
    finally:
        producer.close(timeout=30)
    return done[0], done[1]


def source(spark: SparkSession, bootstrap: str, topic: str, *,
           starting_offsets: str = "earliest", options: dict[str, str] | None = None) -> DataFrame:
    """The topic as read_committed rows: only committed transactions' records."""
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .options(**(options or {}))
        .option("kafka.isolation.level", "read_committed")
        .option("subscribe", topic)
        .option("startingOffsets", starting_offsets)
        .load()
        .selectExpr("topic", "partition", "offset", "CAST(key AS STRING) AS key",
                    "CAST(value AS STRING) AS value")
    )


def start(df: DataFrame, output_dir: str | Path, checkpoint_dir: str | Path, *,
          available_now: bool = False, trigger_interval: str = "5 seconds") -> StreamingQuery:
    """Append ``df`` to Parquet in ``output_dir``, progress in ``checkpoint_dir``."""
    writer = (df.writeStream.queryName("exactly_once_parquet").format("parquet")
              .outputMode("append").option("path", str(output_dir))
              .option("checkpointLocation", str(checkpoint_dir)))
    writer = writer.trigger(availableNow=True) if available_now \
        else writer.trigger(processingTime=trigger_interval)
    return writer.start()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m spark_examples.exactly_once",
        description="A transactional producer into the log, and a read_committed Structured "
                    "Streaming job from it to Parquet with a checkpoint: exactly once.",
        epilog=common.CONNECTOR_EPILOG,
    )
    common.add_common_args(p)
    p.add_argument("--topic", default="payments", help="topic (default payments)")
    sub = p.add_subparsers(dest="command", required=True)
    prod = sub.add_parser("produce", help="write transactions, some aborted")
    prod.add_argument("--transactions", type=int, default=100)
    prod.add_argument("--records", type=int, default=10, help="records per transaction")
    prod.add_argument("--abort-every", type=int, default=3, metavar="N",
                      help="abort every N-th transaction (0: none; default 3)")
    prod.add_argument("--transactional-id", default=TRANSACTIONAL_ID)
    stream = sub.add_parser("stream", help="read_committed stream to Parquet")
    stream.add_argument("--output-dir", default="spark-output/exactly-once")
    stream.add_argument("--checkpoint-dir", default="spark-output/checkpoints/exactly_once")
    g = stream.add_mutually_exclusive_group()
    g.add_argument("--available-now", action="store_true",
                   help="process what the log holds now, then stop")
    g.add_argument("--trigger-interval", default="5 seconds")
    stream.add_argument("--timeout", type=float, default=None, metavar="S",
                        help="stop after S seconds (default: run until Ctrl-C)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    common.setup_logging(args.log_level)
    if args.command == "produce":
        done, aborted = produce(args.bootstrap_servers, args.topic, args.transactions,
                                args.records, args.abort_every, args.transactional_id)
        log.info("%d transactions committed, %d aborted (%d records each) to %s", done,
                 aborted, args.records, args.topic)
        return 0
    connector = common.connector_from_args(args)
    try:
        spark = build_session("exactly_once", master=args.master, connector=connector,
                              log_level=common.spark_log_level(args.log_level))
        require_kafka_source(spark, connector)
    except ConnectorError as exc:
        log.error("%s", exc)
        return 2
    try:
        extra = {k: v for k, v in common.kafka_options(args).items()
                 if k != "kafka.bootstrap.servers"}
        query = start(source(spark, args.bootstrap_servers, args.topic, options=extra),
                      args.output_dir, args.checkpoint_dir, available_now=args.available_now,
                      trigger_interval=args.trigger_interval)
        log.info("reading %s (read_committed) from %s into %s", args.topic,
                 args.bootstrap_servers, args.output_dir)
        return common.run_queries(spark, [query], timeout_s=args.timeout)
    finally:
        spark.stop()


if __name__ == "__main__":
    raise SystemExit(main())
