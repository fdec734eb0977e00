"""``python -m spark_examples.demo`` end to end, as a user runs it (a subprocess): it
starts logserver (and the MQTT bridge), simulates devices, runs the Spark pipelines,
prints the aggregates and stops every process it started, also on Ctrl-C.

The demo with the bridge streams through Spark's Kafka connector (``--mode stream``), with
the jars the connector tests use (``kafka_jars_dir``: SPARK_KAFKA_JARS or
../shared/jars/spark-<major.minor>): without them it skips, and under CI=true it fails.
The demo without the bridge runs the batch path (``--mode batch``), the one a user without
the jars gets."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest
from helpers.spark_support import REPO_ROOT, kafka_jars_dir, no_connector, run_module

from spark_examples import procs, simulate

pytestmark = pytest.mark.slow


def started_pids(output: str) -> list[int]:
    return sorted({int(p) for p in re.findall(r"\(pid (\d+)\)", output)})


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is not alive for our purpose: it already exited
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def check_stopped(out: str, expected: int) -> None:
    pids = started_pids(out)
    assert len(pids) == expected, out
    deadline = time.monotonic() + 10
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(p) for p in pids), f"left running: {[p for p in pids if alive(p)]}"


@pytest.mark.timeout(600)  # a safety net: a JVM start takes minutes under a load of 20+ on 2 cores
def test_demo_without_bridge(tmp_path) -> None:
    r = run_module(
        "spark_examples.demo", "--no-bridge", "--mode", "batch", "--devices", "3", "--messages", "36",
        "--step-ms", "10000", "--workdir", str(tmp_path / "work"), "--show", "100", timeout=540,
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "Per-device aggregates" in out and "sensor-0002" in out
    assert "done: 108 readings from 3 devices via kafka, Spark mode batch" in out
    assert "running the same transformations in batch mode" in out
    assert list((tmp_path / "work" / "telemetry-aggregates").glob("*.parquet"))
    check_stopped(out, expected=1)


@pytest.mark.timeout(600)  # a safety net, as above
def test_streaming_demo_with_mqtt_bridge(tmp_path) -> None:
    """The whole loop: devices -> MQTT -> log -> readStream.format('kafka') -> Parquet and
    the commands topic -> MQTT, on the installed pyspark with its connector jars."""
    ok, why = procs.bridge_available()
    assert ok, f"mqtt_bridge has no runnable entry point: {why}"  # ours: never a skip
    assert simulate.paho_available(), "paho-mqtt (a test dependency) is not installed"
    jars = kafka_jars_dir()
    if jars is None:
        no_connector("the streaming demo needs Spark's Kafka connector jars (SPARK_KAFKA_JARS or ../shared/jars)")
    r = run_module(
        "spark_examples.demo", "--mode", "stream", "--kafka-jars", str(jars), "--devices", "3", "--messages", "36",
        "--step-ms", "10000", "--anomaly-rate", "0.1", "--workdir", str(tmp_path / "work"), "--show", "100",
        timeout=540,
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "streaming with readStream.format('kafka')" in out, out
    assert "done: 108 readings from 3 devices via mqtt, Spark mode stream" in out, out
    assert "mqtt-bridge on 127.0.0.1:" in out
    # Only windows the watermark closed: every device has some, and Parquet holds them.
    m = re.search(r"aggregates of the windows the watermark closed \((\d+) rows", out)
    assert m and int(m.group(1)) > 0, out
    windows = m.group(1)
    assert all(f"sensor-000{d}" in out for d in range(3)), out
    assert list((tmp_path / "work" / "telemetry-aggregates").glob("*.parquet")), out
    # Spark's Kafka sink wrote one record per closed window and the alert commands.
    m = re.search(r"topic telemetry-aggregates: (\d+) records; topic commands: (\d+) alert commands", out)
    assert m and m.group(1) == windows and int(m.group(2)) > 0, out
    m = re.search(r"MQTT: (\d+) of (\d+) commands delivered", out)
    assert m and m.group(1) == m.group(2) and int(m.group(2)) > 0, out
    check_stopped(out, expected=2)


def test_demo_stops_its_processes_on_ctrl_c(tmp_path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.Popen(
        [sys.executable, "-m", "spark_examples.demo", "--no-bridge", "--devices", "2", "--messages", "50000",
         "--workdir", str(tmp_path / "work")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=str(REPO_ROOT),
        stdin=subprocess.DEVNULL,
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        for line in proc.stdout:  # wait until it is publishing
            lines.append(line)
            if "publishing via" in line or time.monotonic() > deadline:
                break
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
        lines.append(rest)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    out = "".join(lines)
    assert proc.returncode == 130, out
    assert "interrupted: stopping" in out and "stopped logserver" in out
    check_stopped(out, expected=1)
