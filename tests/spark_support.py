"""Spark test support: ONE local SparkSession per test run, connector detection, data.

``spark_session()`` builds the session on first use and returns the same one after that,
so every test module's ``spark`` fixture (session scope) shares a single JVM: local[2],
2 shuffle partitions, UI off, UTC. If Spark's Kafka connector jars are on this machine
(``SPARK_KAFKA_JARS`` or the Ivy cache) they are put on the session's classpath, never
downloaded, and ``require_connector`` skips the tests that need them otherwise, with
the exact reason.

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
from pathlib import Path

import pyspark  # noqa: F401 - fail loudly here when the test extra is not installed
import pytest
from pyspark.sql import SparkSession

from spark_examples.session import (
    ENV_JARS,
    Connector,
    build_session,
    find_connector,
    has_kafka_source,
    kafka_package,
)

REPO_ROOT = Path(__file__).resolve().parent.parent

_SESSION: SparkSession | None = None
_CONNECTOR: Connector | None = None

TEST_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.sql.streaming.minBatchesToRetain": "5",
    "spark.driver.memory": "1g",
}


def connector() -> Connector:
    """The connector as found on this machine, local jars only (no download in tests)."""
    global _CONNECTOR
    if _CONNECTOR is None:
        _CONNECTOR = find_connector(env={k: v for k, v in os.environ.items() if k != "PYSPARK_GATEWAY_PORT"}, allow_download=False)
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
    """Skip (with the reason) when format('kafka') cannot load in the shared session."""
    if has_kafka_source(spark):
        return
    conn = connector()
    pytest.skip(
        f"Spark's Kafka connector jars are not available: {conn.source}. To run these tests put "
        f"the jars of {kafka_package()} and its dependencies (spark-token-provider-kafka-0-10, "
        f"kafka-clients, commons-pool2) in a directory and set {ENV_JARS}=/that/dir"
    )


def run_module(*args: str, timeout: float = 120.0, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m spark_examples.<...>`` with the repository on PYTHONPATH."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), full_env.get("PYTHONPATH", "")) if p)
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
