"""The Spark telemetry pipeline on a 3-node cluster (RF 3, min.insync.replicas 2): the
partition leader is killed with -9 between micro-batches and the stream's windows come
out exactly as on one broker (nothing lost, nothing twice). Real etcd, real brokers,
real Spark streaming engine (records fetched with kafka-python, as in
test_spark_streaming.py).
"""

from __future__ import annotations

import pytest
from helpers.cluster_clients import create
from helpers.clusterprocs import running_cluster
from helpers.spark_support import BASE, MIN, LogToFiles, await_all, reading, windows
from helpers.waiting import wait_until

from spark_examples import device_telemetry

pytestmark = pytest.mark.slow

TOPIC = "cluster-telemetry"


@pytest.fixture
def cluster(tmp_path):
    with running_cluster(tmp_path, 3, **{"min.insync.replicas": 2, "default.replication.factor": 3}) as nodes:
        yield nodes


def test_telemetry_windows_are_exact_through_a_leader_kill(spark, cluster, tmp_path) -> None:
    create(cluster, TOPIC, partitions=1, rf=3)
    log = LogToFiles(spark, cluster.bootstrap, TOPIC, tmp_path / "in")
    out, ckpt = tmp_path / "aggregates", tmp_path / "checkpoints"
    args = device_telemetry.build_parser().parse_args([
        "--output-dir", str(out), "--checkpoint-dir", str(ckpt), "--available-now",
        "--metric", "temperature", "--window", "1 minute", "--watermark", "2 minutes",
    ])
    # d1 and d2 read every 10 s for 5 minutes; the first half goes in before the kill
    readings = [(d, reading(d, BASE + i * 10_000, temperature=20.0 + i)) for i in range(30)
                for d in ("d1", "d2")]
    assert log.append(readings[:30]) == 30
    await_all(device_telemetry.start_queries(spark, args, kafka_df=log.stream(), sinks=("parquet",)))

    leader = cluster.partition(TOPIC, 0).leader
    cluster.brokers[leader].kill9()
    wait_until(lambda: (p := cluster.partition(TOPIC, 0)) is not None and p.leader not in (leader, -1),
               30, "a new leader")
    log.bootstrap = cluster.bootstrap  # the dead broker left the bootstrap list
    assert log.append(readings[30:]) == 30
    # one reading 10 minutes on moves the watermark past every window
    assert log.append([("d1", reading("d1", BASE + 10 * MIN, temperature=0.0))]) == 1
    await_all(device_telemetry.start_queries(spark, args, kafka_df=log.stream(), sinks=("parquet",)))

    got = windows(spark, out)
    assert sorted(got) == sorted((d, BASE + k * MIN) for d in ("d1", "d2") for k in range(5))
    for (_device, start), w in got.items():
        i0 = (start - BASE) // 10_000
        temps = [20.0 + i for i in range(i0, i0 + 6)]
        assert (w["count"], w["temperature_min"], w["temperature_max"]) == (6, min(temps), max(temps))
    assert spark.read.parquet(str(out)).count() == 10
