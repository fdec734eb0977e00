"""Spark test support: ONE local SparkSession per test run, connector detection, data.

``spark_session()`` builds the session on first use and returns the same one after that,
so every test module's ``spark`` fixture (session scope) shares a single JVM: local[2],
2 shuffle partitions, UI off, UTC. Spark's Kafka connector jars are put on the session's
classpath from this machine, never downloaded: ``SPARK_KAFKA_JARS`` if set, else
``<repo>/../shared/jars/spark-<major.minor of pyspark>`` (where CI keeps them, beside the
clone), else the Ivy cache. Without them ``require_connector`` skips the tests that need
them, with the exact reason, except in CI (``CI=true``), where it fails them: tests that
never run rot.

pyspark is a test dependency (the ``test`` extra): a missing pyspark fails collection
loudly rather than skipping.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import NoReturn

import pyspark  # noqa: F401 - fail loudly here when the test extra is not installed
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_examples.kafkaframe import fetch_records, records_to_frame
from spark_examples.schemas import KAFKA_SOURCE_SCHEMA
from spark_examples.session import (
    ENV_JARS,
    Connector,
    build_session,
    find_connector,
    has_kafka_source,
    kafka_package,
    spark_version,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
ENV_CI = "CI"

_SESSION: SparkSession | None = None
_CONNECTOR: Connector | None = None

#: The tests' JVMs handle a few hundred records each and live for seconds to minutes: the
#: C1 JIT only (C2's compiler threads spend more CPU than they win back in so short a run)
#: and the serial collector (one GC thread, a 1 GiB heap). The JVM's own tuning, not
#: Spark's: query plans, codegen and results are the same. CPU with the defaults, then
#: with these: ``spark_examples.session --check`` 16.2 s, 10.3 s; test_spark_transforms.py
#: 79.6 s, 51.1 s (docs/testing.md).
TEST_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

TEST_CONF = {
    "spark.driver.extraJavaOptions": TEST_JAVA_OPTIONS,  # local mode: the driver runs the tasks
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.sql.streaming.minBatchesToRetain": "5",
    "spark.driver.memory": "1g",
}


def shared_jars_dir(repo_root: Path = REPO_ROOT, version: str | None = None) -> Path:
    """``<repo>/../shared/jars/spark-<major.minor>``: where CI keeps the connector jars
    for each pyspark line, beside the fresh clone (never inside the project)."""
    major_minor = ".".join((version or spark_version()).split(".")[:2])
    return repo_root.parent / "shared" / "jars" / f"spark-{major_minor}"


def kafka_jars_dir(env: Mapping[str, str] | None = None, repo_root: Path = REPO_ROOT, version: str | None = None) -> Path | None:
    """The connector jars directory the tests use: ``SPARK_KAFKA_JARS`` if set (even when
    wrong, so that a typo fails loudly), else the shared one if it exists, else None."""
    env = os.environ if env is None else env
    if env.get(ENV_JARS):
        return Path(env[ENV_JARS]).expanduser()
    shared = shared_jars_dir(repo_root, version)
    return shared if shared.is_dir() else None


def in_ci(env: Mapping[str, str] | None = None) -> bool:
    """``CI=true``, as GitHub Actions, GitLab CI and our .ci/run set it."""
    env = os.environ if env is None else env
    return env.get(ENV_CI, "").strip().lower() == "true"


def connector() -> Connector:
    """The connector as found on this machine, local jars only (no download in tests)."""
    global _CONNECTOR
    if _CONNECTOR is None:
        env = {k: v for k, v in os.environ.items() if k != "PYSPARK_GATEWAY_PORT"}
        _CONNECTOR = find_connector(env=env, jars_dir=kafka_jars_dir(env), allow_download=False)
    return _CONNECTOR


def spark_session() -> SparkSession:
    """The shared session (built once per test run, stopped at exit)."""
    global _SESSION
    if _SESSION is None:
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            pytest.fail("pyspark needs Java 17+ and no 'java' is on PATH (apt-get install openjdk-17-jre-headless)")
        conn = connector()
        _SESSION = build_session(
            "logserver-tests", master="local[2]", connector=conn if conn.local else None, conf=TEST_CONF, log_level="ERROR"
        )
        atexit.register(_SESSION.stop)
    return _SESSION


def require_connector(spark: SparkSession) -> None:
    """Skip (with the reason) when format('kafka') cannot load in the shared session;
    fail instead in CI."""
    if has_kafka_source(spark):
        return
    conn = connector()
    shared = "" if os.environ.get(ENV_JARS) else f"; {shared_jars_dir()} does not exist"
    no_connector(
        f"Spark's Kafka connector is not on the classpath ({conn.source}{shared}). To run "
        f"these tests put the jars of {kafka_package()} and its "
        f"dependencies (spark-token-provider-kafka-0-10, kafka-clients, commons-pool2) in a "
        f"directory and set {ENV_JARS}=/that/dir"
    )


def no_connector(reason: str, env: Mapping[str, str] | None = None) -> NoReturn:
    """Outside CI a missing connector skips; in CI (``CI=true``) it fails the test."""
    if in_ci(env):
        pytest.fail(f"{ENV_CI}=true and {reason}", pytrace=False)
    pytest.skip(reason)


def run_module(*args: str, timeout: float = 120.0, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m spark_examples.<...>`` with the repository on PYTHONPATH."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), full_env.get("PYTHONPATH", "")) if p)
    # The JVM a module starts (pyspark's launcher reads this): TEST_JAVA_OPTIONS, as the
    # shared session has; a PYSPARK_SUBMIT_ARGS of the caller's own wins.
    full_env.setdefault("PYSPARK_SUBMIT_ARGS", f'--driver-java-options "{TEST_JAVA_OPTIONS}" pyspark-shell')
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", *args],
        capture_output=True, text=True, timeout=timeout, cwd=str(REPO_ROOT), env=full_env,
        stdin=subprocess.DEVNULL,
    )


def produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None, list | None]]) -> None:
    """(key, value, headers) records with kafka-python, acks=all, each acknowledged."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=2)
    try:
        futs = [producer.send(topic, key=k, value=v, headers=h or []) for k, v, h in records]
        producer.flush(timeout=30)
        for f in futs:
            f.get(timeout=30)
    finally:
        producer.close(timeout=10)


def reading(device: str, ts: float, temperature: float | None = None, humidity: float | None = None, **extra) -> bytes:
    """A telemetry payload as a device sends it."""
    body: dict = {"device_id": device, "ts": ts}
    if temperature is not None:
        body["temperature"] = temperature
    if humidity is not None:
        body["humidity"] = humidity
    body.update(extra)
    return json.dumps(body).encode()


BASE = 1_800_000_000_000 // 60_000 * 60_000  # a minute boundary, for event times
MIN = 60_000  # one minute in ms


class LogToFiles:
    """Produce to logserver, read back with kafka-python, append as a Parquet 'batch'."""

    def __init__(self, spark: SparkSession, bootstrap: str, topic: str, root: Path) -> None:
        self.spark, self.bootstrap, self.topic, self.root = spark, bootstrap, topic, root
        self.done: set[tuple[int, int]] = set()  # (partition, offset) already written
        self.batches = 0

    def append(self, payloads: list[tuple[str, bytes]]) -> int:
        """Produce ``(key, value)`` pairs; write the records new in the log as one file batch."""
        produce(self.bootstrap, self.topic, [(k.encode(), v, None) for k, v in payloads])
        records = fetch_records(self.bootstrap, self.topic, min_records=len(self.done) + len(payloads))
        fresh = [r for r in records if (r.partition, r.offset) not in self.done]
        self.done |= {(r.partition, r.offset) for r in fresh}
        self.batches += 1
        records_to_frame(self.spark, fresh).write.parquet(str(self.root / f"batch-{self.batches:03d}"))
        return len(fresh)

    def stream(self) -> DataFrame:
        return (
            self.spark.readStream.schema(KAFKA_SOURCE_SCHEMA)
            .option("recursiveFileLookup", "true")
            .parquet(str(self.root))
        )


def await_all(queries, timeout_s: float = 120) -> None:
    """Every streaming query finished in time, without an exception."""
    for q in queries:
        assert q.awaitTermination(timeout_s), f"query {q.name} did not finish in {timeout_s}s"
        assert q.exception() is None, q.exception()


def windows(spark: SparkSession, path: Path) -> dict[tuple[str, int], dict]:
    """The window rows written to ``path``, by (device id, window start in ms)."""
    df = spark.read.parquet(str(path)).withColumn("ws", F.unix_millis("window_start"))
    return {(r["device_id"], r["ws"]): r.asDict() for r in df.collect()}
