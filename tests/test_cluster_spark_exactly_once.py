"""spark_examples.exactly_once on 3 brokers (RF 3, min.insync.replicas 2): a transactional
producer (kafka-python) commits and aborts transactions, Spark's stock Kafka source reads
them with ``kafka.isolation.level=read_committed`` in a running Structured Streaming query
that appends to Parquet with a checkpoint, and the leader of a partition is killed with -9
while the query runs; more transactions follow on the survivors. The Parquet output holds
every committed record exactly once and no aborted one. Needs the connector jars
(SPARK_KAFKA_JARS or ../shared/jars, as tests/test_spark_kafka_connector.py)."""

from __future__ import annotations

import pytest
from clusterprocs import running_cluster, wait_until
from pyspark.sql import SparkSession
from spark_support import require_connector, spark_session
from test_cluster import create

from spark_examples import exactly_once

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

TOPIC = "payments"
RECORDS = 4  # per transaction
ABORT_EVERY = 3
SCHEMA = "topic STRING, partition INT, offset LONG, key STRING, value STRING"


@pytest.fixture(scope="module")
def spark() -> SparkSession:
    session = spark_session()
    require_connector(session)
    return session


def _expected(transactions: int) -> list[str]:
    return sorted(exactly_once.value(t, r) for t in range(transactions)
                  if exactly_once.committed(t, ABORT_EVERY) for r in range(RECORDS))


def test_committed_records_land_once_through_a_leader_kill(spark, tmp_path) -> None:
    out, ckpt = tmp_path / "out", tmp_path / "checkpoint"

    def values() -> list[str]:
        if not (out / "_spark_metadata").is_dir():
            return []
        rows = spark.read.schema(SCHEMA).parquet(str(out)).select("value").collect()
        return sorted(row.value for row in rows)

    with running_cluster(tmp_path / "cluster", 3, **{"min.insync.replicas": 2,
                                                     "default.replication.factor": 3}) as cluster:
        create(cluster, TOPIC, partitions=2, rf=3)
        bootstrap = cluster.bootstrap
        assert exactly_once.produce(bootstrap, TOPIC, 9, RECORDS, ABORT_EVERY) == (6, 3)
        query = exactly_once.start(exactly_once.source(spark, bootstrap, TOPIC), out, ckpt,
                                   trigger_interval="1 second")
        try:
            wait_until(lambda: values() == _expected(9) or query.exception(), 90,
                       "the first transactions' committed records in Parquet")
            assert query.exception() is None, query.exception()
            leader = cluster.partition(TOPIC, 0).leader
            cluster.brokers[leader].kill9()  # mid-stream: the query keeps polling
            wait_until(lambda: (p := cluster.partition(TOPIC, 0)) is not None
                       and p.leader not in (leader, -1), 30, "a new leader of partition 0")
            assert exactly_once.produce(cluster.bootstrap, TOPIC, 9, RECORDS, ABORT_EVERY,
                                        first=9) == (6, 3)
            wait_until(lambda: len(values()) >= len(_expected(18)) or query.exception(), 120,
                       "the later transactions' committed records in Parquet")
            assert query.exception() is None, query.exception()
        finally:
            query.stop()
        got = values()
        assert got == _expected(18)  # every committed record, once; no aborted one
        assert len(set(got)) == len(got)
        rows = spark.read.schema(SCHEMA).parquet(str(out)).select("partition", "offset").collect()
        assert len({(r.partition, r.offset) for r in rows}) == len(rows)
