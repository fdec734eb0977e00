"""spark_examples.exactly_once on 3 brokers (RF 3, min.insync.replicas 2): a transactional
producer (kafka-python) commits and aborts transactions, Spark's stock Kafka source reads
them with ``kafka.isolation.level=read_committed`` in a running Structured Streaming query
that appends to Parquet with a checkpoint, and the leader of a partition is killed with -9
while the query runs; more transactions follow on the survivors. The Parquet output holds
every committed record exactly once and no aborted one. Needs the connector jars
(SPARK_KAFKA_JARS or ../shared/jars, as tests/spark/test_spark_kafka_connector.py)."""

from __future__ import annotations

import pytest
from helpers.cluster_clients import create
from helpers.cluster_txn import txn_coordinator
from helpers.clusterprocs import running_cluster
from helpers.spark_support import require_connector, spark_session
from helpers.waiting import wait_until
from pyspark.sql import SparkSession

from spark_examples import exactly_once

pytestmark = [pytest.mark.slow, pytest.mark.timeout(480)]

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


def _wait_for(query, values, expected: list[str], what: str) -> None:
    """Until the output holds ``expected`` (or more: a duplicate fails the caller) or the
    query failed; a timeout says how far the query got."""
    try:
        wait_until(lambda: len(values()) >= len(expected) or query.exception(), 150,
                   f"{what}' committed records in Parquet")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {len(values())} of {len(expected)} rows; query status "
                             f"{query.status}, last progress {query.lastProgress}") from None
    assert query.exception() is None, query.exception()


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
            _wait_for(query, values, _expected(9), "the first transactions")
            assert values() == _expected(9)
            # Mid-stream, the query polling: a partition leader dies. One that is not the
            # transaction coordinator (its death is tests/cluster/test_cluster_txn_failover.py's),
            # so the next producer does not wait out kafka-python's 30 s on it.
            coordinator = txn_coordinator(cluster, exactly_once.TRANSACTIONAL_ID)
            index, leader = next(((i, p.leader) for i in range(2)
                                  if (p := cluster.partition(TOPIC, i)).leader != coordinator),
                                 (0, cluster.partition(TOPIC, 0).leader))
            cluster.brokers[leader].kill9()
            wait_until(lambda: (p := cluster.partition(TOPIC, index)) is not None
                       and p.leader not in (leader, -1), 30, f"a new leader of partition {index}")
            assert exactly_once.produce(cluster.bootstrap, TOPIC, 9, RECORDS, ABORT_EVERY,
                                        first=9) == (6, 3)
            _wait_for(query, values, _expected(18), "the later transactions")
        finally:
            query.stop()
        got = values()
        assert got == _expected(18)  # every committed record, once; no aborted one
        assert len(set(got)) == len(got)
        rows = spark.read.schema(SCHEMA).parquet(str(out)).select("partition", "offset").collect()
        assert len({(r.partition, r.offset) for r in rows}) == len(rows)
