"""Spark's stock Kafka source and sink options against a real logserver: subscribePattern,
minPartitions, maxOffsetsPerTrigger, compressed batches both ways, the Kafka and Parquet
sinks restarted from their checkpoints, read_committed over committed, aborted and open
transactions, and failOnDataLoss after DeleteRecords. Needs the connector jars, like
test_spark_kafka_connector.py (docs/spark.md: the coverage table), and runs on both
pyspark tiers of tests/run.sh.
"""

from __future__ import annotations

import confluent_kafka
import pytest
from helpers.clienthelpers import create_topic, kp_admin
from helpers.spark_support import produce, require_connector
from kafka import KafkaProducer, TopicPartition
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from spark_examples.kafkaframe import fetch_records

CODECS = ("gzip", "snappy", "lz4", "zstd")


@pytest.fixture(autouse=True)
def _connector(spark) -> None:
    require_connector(spark)


def batch(spark: SparkSession, bootstrap: str, **opts: str):
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in opts.items():
        reader = reader.option(k, v)
    return reader.load()


def stream(spark: SparkSession, bootstrap: str, **opts: str):
    reader = spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in {"startingOffsets": "earliest", **opts}.items():
        reader = reader.option(k, v)
    return reader.load()


def run_available_now(df, name: str, checkpoint, fmt: str = "memory", **opts: str):
    """One availableNow run of ``df`` into ``fmt``; the finished query (asserted clean)."""
    writer = df.writeStream.format(fmt).queryName(name).option("checkpointLocation", str(checkpoint))
    for k, v in opts.items():
        writer = writer.option(k, v)
    query = writer.trigger(availableNow=True).start()
    assert query.awaitTermination(180), f"{name} did not finish"
    assert query.exception() is None, query.exception()
    return query


def values(spark: SparkSession, table: str) -> list[str]:
    return sorted(r.v for r in spark.sql(f"SELECT CAST(value AS STRING) AS v FROM {table}").collect())


def parquet_values(spark: SparkSession, path) -> list[str]:
    """The values a Parquet sink committed (the memory sink cannot restart from a checkpoint)."""
    return sorted(r.v for r in spark.read.parquet(str(path)).selectExpr("CAST(value AS STRING) AS v").collect())


def test_subscribe_pattern_and_min_partitions(spark, module_server, topic_name) -> None:
    bs = module_server.bootstrap
    for suffix in ("a", "b", "other"):
        create_topic(bs, f"{topic_name}-{suffix}", 1)
    produce(bs, f"{topic_name}-a", [(None, f"a{i}".encode(), None) for i in range(8)])
    produce(bs, f"{topic_name}-b", [(None, b"b0", None)])
    produce(bs, f"{topic_name}-other", [(None, b"x", None)])
    df = batch(spark, bs, subscribePattern=f"{topic_name}-[ab]", startingOffsets="earliest",
               endingOffsets="latest", minPartitions="6")
    # 2 topic partitions of 8 and 1 records: the 8 split by offset ranges into 5 Spark partitions
    assert df.rdd.getNumPartitions() >= 6
    rows = df.selectExpr("topic", "CAST(value AS STRING) AS v").collect()
    assert sorted((r.topic[len(topic_name):], r.v) for r in rows) == \
        sorted([("-a", f"a{i}") for i in range(8)] + [("-b", "b0")])


def test_max_offsets_per_trigger_splits_the_backlog(spark, module_server, topic_name, tmp_path) -> None:
    bs = module_server.bootstrap
    create_topic(bs, topic_name, 1)
    produce(bs, topic_name, [(None, f"r{i:02d}".encode(), None) for i in range(25)])
    query = run_available_now(stream(spark, bs, subscribe=topic_name, maxOffsetsPerTrigger="10"),
                              "max_offsets", tmp_path / "ckpt")
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [10, 10, 5]
    assert values(spark, "max_offsets") == [f"r{i:02d}" for i in range(25)]


def test_compressed_batches_both_ways(spark, module_server, topic_name, tmp_path) -> None:
    """librdkafka writes a batch in each codec, Spark's source reads them; Spark's sink
    writes in each codec, kafka-python reads it back."""
    bs = module_server.bootstrap
    create_topic(bs, topic_name, 1)
    for codec in CODECS:
        p = confluent_kafka.Producer({"bootstrap.servers": bs, "compression.type": codec, "linger.ms": 50})
        for i in range(5):
            p.produce(topic_name, key=codec.encode(), value=f"{codec}-{i}".encode() * 20)
        assert p.flush(30) == 0
    df = batch(spark, bs, subscribe=topic_name, startingOffsets="earliest", endingOffsets="latest")
    got = df.selectExpr("CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v").collect()
    assert sorted((r.k, r.v) for r in got) == sorted((c, f"{c}-{i}" * 20) for c in CODECS for i in range(5))

    for codec in CODECS:
        out = f"{topic_name}-out-{codec}"
        create_topic(bs, out, 1)
        (df.selectExpr("key", "value").write.format("kafka").option("kafka.bootstrap.servers", bs)
         .option("kafka.compression.type", codec).option("topic", out).save())
        back = fetch_records(bs, out, min_records=20)
        assert sorted((r.key.decode(), r.value.decode()) for r in back) == sorted((r.k, r.v) for r in got)


def test_both_sinks_restart_from_their_checkpoints(spark, module_server, topic_name, tmp_path) -> None:
    """A stream into a Kafka topic and into Parquet, each with its checkpoint, run, fed
    more and run again: each record in each sink once, in the order of the source."""
    bs = module_server.bootstrap
    create_topic(bs, topic_name, 1)
    out_topic, parquet = f"{topic_name}-out", tmp_path / "parquet"
    create_topic(bs, out_topic, 1)

    def run() -> None:
        src = stream(spark, bs, subscribe=topic_name).selectExpr("key", "value")
        run_available_now(src, "to_kafka", tmp_path / "ckpt-kafka", fmt="kafka",
                          **{"kafka.bootstrap.servers": bs, "topic": out_topic})
        run_available_now(src, "to_parquet", tmp_path / "ckpt-parquet", fmt="parquet", path=str(parquet))

    produce(bs, topic_name, [(b"k", f"first-{i}".encode(), None) for i in range(6)])
    run()
    produce(bs, topic_name, [(b"k", f"second-{i}".encode(), None) for i in range(4)])
    run()
    expected = [f"first-{i}" for i in range(6)] + [f"second-{i}" for i in range(4)]
    assert [r.value.decode() for r in fetch_records(bs, out_topic, min_records=10)] == expected
    rows = spark.read.parquet(str(parquet)).selectExpr("CAST(value AS STRING) AS v").collect()
    assert sorted(r.v for r in rows) == sorted(expected)
    assert len(list((tmp_path / "ckpt-kafka" / "commits").iterdir())) >= 2  # two runs, two batches


def _transaction(bs: str, tid: str, topic: str, prefix: str, end: str | None) -> KafkaProducer:
    """A transaction of 3 records, then committed, aborted or (end None) left open. The
    coordinator aborts a transaction open longer than its timeout (as Kafka does): 10
    minutes, not kafka-python's default of 60 s, which a loaded machine's Spark reads pass."""
    p = KafkaProducer(bootstrap_servers=bs, transactional_id=tid, linger_ms=5, transaction_timeout_ms=600_000)
    p.init_transactions()
    p.begin_transaction()
    for i in range(3):
        p.send(topic, value=f"{prefix}-{i}".encode())
    p.flush(timeout=30)
    if end == "commit":
        p.commit_transaction()
    elif end == "abort":
        p.abort_transaction()
    return p


def test_read_committed_over_committed_aborted_and_open_transactions(spark, module_server, topic_name,
                                                                      tmp_path) -> None:
    bs = module_server.bootstrap
    create_topic(bs, topic_name, 1)
    done = [_transaction(bs, f"{topic_name}-c", topic_name, "committed", "commit"),
            _transaction(bs, f"{topic_name}-a", topic_name, "aborted", "abort")]
    open_txn = _transaction(bs, f"{topic_name}-o", topic_name, "open", None)
    produce(bs, topic_name, [(None, b"after-open", None)])  # not transactional, behind the open one
    try:
        committed = [f"committed-{i}" for i in range(3)]
        opts = {"subscribe": topic_name, "kafka.isolation.level": "read_committed"}
        df = batch(spark, bs, startingOffsets="earliest", endingOffsets="latest", **opts)
        assert sorted(r.value.decode() for r in df.collect()) == committed  # up to the LSO
        uncommitted = batch(spark, bs, subscribe=topic_name, startingOffsets="earliest", endingOffsets="latest")
        assert len(uncommitted.collect()) == 10  # everything but the markers, aborted ones too
        out = tmp_path / "out"
        src = stream(spark, bs, **opts).selectExpr("value")
        run_available_now(src, "read_committed", tmp_path / "ckpt", fmt="parquet", path=str(out))
        assert parquet_values(spark, out) == committed
        open_txn.commit_transaction()  # the LSO moves past the open transaction and the record after it
        run_available_now(src, "read_committed", tmp_path / "ckpt", fmt="parquet", path=str(out))
        assert parquet_values(spark, out) == sorted([*committed, "after-open", *[f"open-{i}" for i in range(3)]])
    finally:
        for p in [*done, open_txn]:
            p.close(timeout=10)


def test_fail_on_data_loss_after_delete_records(spark, module_server, topic_name, tmp_path) -> None:
    """A query whose next offset was deleted (DeleteRecords) fails with failOnDataLoss
    true, and with false goes on from the new log start offset."""
    bs = module_server.bootstrap
    create_topic(bs, topic_name, 1)
    produce(bs, topic_name, [(None, f"r{i}".encode(), None) for i in range(5)])
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    run_available_now(stream(spark, bs, subscribe=topic_name).selectExpr("value"), "before_loss", ckpt,
                      fmt="parquet", path=str(out))
    assert parquet_values(spark, out) == [f"r{i}" for i in range(5)]
    produce(bs, topic_name, [(None, f"r{i}".encode(), None) for i in range(5, 10)])
    admin = kp_admin(bs)
    try:
        admin.delete_records({TopicPartition(topic_name, 0): 8})  # offsets 5..7 never read
    finally:
        admin.close()

    query = (stream(spark, bs, subscribe=topic_name, failOnDataLoss="true").selectExpr("value").writeStream
             .format("parquet").option("path", str(out)).option("checkpointLocation", str(ckpt))
             .trigger(availableNow=True).start())
    with pytest.raises(StreamingQueryException, match="failOnDataLoss"):
        query.awaitTermination(180)  # raises the query's failure; returns False on a timeout
    assert query.exception() is not None

    run_available_now(stream(spark, bs, subscribe=topic_name, failOnDataLoss="false").selectExpr("value"),
                      "after_loss", ckpt, fmt="parquet", path=str(out))
    assert parquet_values(spark, out) == [f"r{i}" for i in (0, 1, 2, 3, 4, 8, 9)]
