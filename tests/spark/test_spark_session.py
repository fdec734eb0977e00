"""spark_examples.session: finding Spark's Kafka connector; every command's --help;
replay's offset options; the simulator. No Spark session needed (fast)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyspark
import pytest
from helpers.spark_support import (
    REPO_ROOT,
    TEST_JAVA_OPTIONS,
    in_ci,
    kafka_jars_dir,
    no_connector,
    run_module,
    shared_jars_dir,
)

from spark_examples import replay, simulate
from spark_examples.session import (
    ENV_JARS,
    ConnectorError,
    find_connector,
    kafka_package,
    pick_connector_jars,
    pyspark_home,
    scala_binary_version,
    spark_version,
)

CONNECTOR_JARS = [
    "spark-sql-kafka-0-10_2.12-3.5.9.jar",
    "spark-token-provider-kafka-0-10_2.12-3.5.9.jar",
    "kafka-clients-3.4.1.jar",
    "commons-pool2-2.11.1.jar",
]
NO_ENV: dict[str, str] = {}
#: javac and jar are short JDK tools: the C1 compiler only and one GC thread.
LIGHT_JVM = ["-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC"]


def touch(d: Path, *names: str) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for n in names:
        (d / n).write_bytes(b"PK\x05\x06" + b"\0" * 18)  # an empty zip: enough for a name check


# --------------------------------------------------------------------------- versions
def test_scala_version_is_read_from_pyspark_jars() -> None:
    jars = pyspark_home() / "jars"
    scala = scala_binary_version()
    assert scala in ("2.12", "2.13")
    assert list(jars.glob(f"scala-library-{scala}.*.jar")), "the answer comes from the shipped scala-library jar"
    assert kafka_package() == f"org.apache.spark:spark-sql-kafka-0-10_{scala}:{spark_version()}"
    assert pyspark.__version__.startswith(spark_version())


def test_scala_version_fallbacks(tmp_path: Path) -> None:
    touch(tmp_path / "a", "scala-library-2.13.14.jar", "spark-core_2.13-4.0.1.jar")
    assert scala_binary_version(tmp_path / "a") == "2.13"
    touch(tmp_path / "b", "spark-core_2.12-3.5.1.jar")
    assert scala_binary_version(tmp_path / "b") == "2.12"
    (tmp_path / "c").mkdir()
    with pytest.raises(ConnectorError, match="no scala-library"):
        scala_binary_version(tmp_path / "c")
    assert kafka_package("4.0.1", "2.13") == "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.1"


# pyspark line -> the jars its wheel ships and the connector built for it
PYSPARK_LINES = [
    ("3.5.9", ["scala-library-2.12.18.jar", "spark-core_2.12-3.5.9.jar"], "spark-sql-kafka-0-10_2.12:3.5.9"),
    ("4.0.1", ["scala-library-2.13.16.jar", "spark-core_2.13-4.0.1.jar"], "spark-sql-kafka-0-10_2.13:4.0.1"),
    ("4.3.0", ["scala-library-2.13.17.jar", "spark-core_2.13-4.3.0.jar"], "spark-sql-kafka-0-10_2.13:4.3.0"),
]


@pytest.mark.parametrize(("version", "shipped", "artifact"), PYSPARK_LINES, ids=[v for v, _, _ in PYSPARK_LINES])
def test_connector_coordinates_follow_the_pyspark_line(tmp_path: Path, version: str, shipped: list[str], artifact: str) -> None:
    """pyspark 3.5 is Scala 2.12, 4.x is Scala 2.13: the download asks for the connector of
    the same Scala and Spark version, and local jars of another line are called a mismatch."""
    touch(tmp_path / "pyspark" / "jars", *shipped)
    scala = scala_binary_version(tmp_path / "pyspark" / "jars")
    assert kafka_package(spark_version(f"{version}.dev0"), scala) == f"org.apache.spark:{artifact}"
    conn = find_connector(NO_ENV, home=tmp_path / "home", version=version, scala=scala)
    assert conn.mode == "packages" and conn.packages == f"org.apache.spark:{artifact}"
    assert conn.spark_conf() == {"spark.jars.packages": f"org.apache.spark:{artifact}"}
    wrong = "spark-sql-kafka-0-10_2.12-3.5.9.jar" if scala == "2.13" else "spark-sql-kafka-0-10_2.13-4.0.1.jar"
    touch(tmp_path / "other-line", wrong)
    text = " ".join(find_connector({ENV_JARS: str(tmp_path / "other-line")}, version=version, scala=scala).warnings)
    assert "version mismatch" in text and f"{artifact.replace(':', '-')}.jar" in text


# --------------------------------------------------------------------------- SPARK_KAFKA_JARS
def test_local_jars_dir_puts_every_jar_on_the_classpath(tmp_path: Path) -> None:
    touch(tmp_path, *CONNECTOR_JARS, "extra-dependency-1.0.jar", "README.txt")
    conn = find_connector({ENV_JARS: str(tmp_path)}, home=tmp_path / "home", version="3.5.9", scala="2.12")
    assert conn.mode == "jars" and conn.local
    assert sorted(j.name for j in conn.jars) == sorted([*CONNECTOR_JARS, "extra-dependency-1.0.jar"])
    assert conn.warnings == []
    conf = conn.spark_conf()
    assert list(conf) == ["spark.jars"]
    assert all(Path(p).is_absolute() for p in conf["spark.jars"].split(","))
    assert conn.submit_args()[0] == "--jars"
    # the flag wins over the environment
    other = tmp_path / "other"
    touch(other, *CONNECTOR_JARS)
    conn2 = find_connector({ENV_JARS: str(tmp_path)}, jars_dir=other, home=tmp_path / "home", version="3.5.9", scala="2.12")
    assert {j.parent for j in conn2.jars} == {other}


def test_local_jars_dir_problems_are_explained(tmp_path: Path) -> None:
    with pytest.raises(ConnectorError, match="not a directory"):
        find_connector({ENV_JARS: str(tmp_path / "missing")}, version="3.5.9", scala="2.12")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConnectorError, match="no \\*.jar"):
        find_connector({ENV_JARS: str(tmp_path / "empty")}, version="3.5.9", scala="2.12")
    touch(tmp_path / "wrong", "spark-sql-kafka-0-10_2.13-4.0.0.jar", "kafka-clients-3.9.0.jar")
    conn = find_connector({ENV_JARS: str(tmp_path / "wrong")}, version="3.5.9", scala="2.12")
    assert conn.mode == "jars"
    text = " ".join(conn.warnings)
    assert "spark-sql-kafka-0-10_2.12-3.5.9.jar" in text and "version mismatch" in text
    assert "commons-pool2" in text and "spark-token-provider" in text


# --------------------------------------------------------------------------- the tests' own jars
def test_tests_find_the_shared_jars_beside_the_clone(tmp_path: Path) -> None:
    """SPARK_KAFKA_JARS wins; else <repo>/../shared/jars/spark-<major.minor> if it exists."""
    repo = tmp_path / "clone"
    repo.mkdir()
    assert shared_jars_dir(repo, "3.5.9") == tmp_path / "shared" / "jars" / "spark-3.5"
    assert shared_jars_dir(repo, "4.3.0") == tmp_path / "shared" / "jars" / "spark-4.3"
    assert kafka_jars_dir(NO_ENV, repo, "3.5.9") is None
    touch(tmp_path / "shared" / "jars" / "spark-4.0", *CONNECTOR_JARS)  # another pyspark line's
    assert kafka_jars_dir(NO_ENV, repo, "3.5.9") is None
    touch(tmp_path / "shared" / "jars" / "spark-3.5", *CONNECTOR_JARS)
    assert kafka_jars_dir(NO_ENV, repo, "3.5.9") == tmp_path / "shared" / "jars" / "spark-3.5"
    assert kafka_jars_dir({ENV_JARS: ""}, repo, "3.5.9") == tmp_path / "shared" / "jars" / "spark-3.5"
    assert kafka_jars_dir({ENV_JARS: str(tmp_path / "mine")}, repo, "3.5.9") == tmp_path / "mine"
    conn = find_connector(NO_ENV, jars_dir=kafka_jars_dir(NO_ENV, repo, "3.5.9"), home=tmp_path / "home", version="3.5.9", scala="2.12")
    assert conn.mode == "jars" and len(conn.jars) == 4 and conn.warnings == []


def test_missing_connector_skips_but_fails_in_ci() -> None:
    """Tests that never run rot: in CI a missing connector is a failure, not a skip."""
    assert in_ci({"CI": "true"}) and in_ci({"CI": "TRUE"})
    assert not in_ci(NO_ENV) and not in_ci({"CI": "false"}) and not in_ci({"CI": ""})
    with pytest.raises(pytest.fail.Exception, match="CI=true and no jars here"):
        no_connector("no jars here", {"CI": "true"})
    with pytest.raises(pytest.skip.Exception, match="^no jars here$"):
        no_connector("no jars here", {"CI": "false"})


# --------------------------------------------------------------------------- Ivy cache
@pytest.mark.parametrize("layout", ["retrieved", "cache"])
def test_ivy_cache_is_used_offline(tmp_path: Path, layout: str) -> None:
    home = tmp_path / "home"
    if layout == "retrieved":  # ~/.ivy2/jars/<org>_<artifact>-<version>.jar
        touch(home / ".ivy2" / "jars", *[
            "org.apache.spark_spark-sql-kafka-0-10_2.12-3.5.9.jar",
            "org.apache.spark_spark-token-provider-kafka-0-10_2.12-3.5.9.jar",
            "org.apache.kafka_kafka-clients-3.4.1.jar",
            "org.apache.commons_commons-pool2-2.11.1.jar",
            "org.apache.spark_spark-sql-kafka-0-10_2.12-3.5.1.jar",  # an older Spark's: ignored
        ])
    else:  # ~/.ivy2.5.2/cache/<org>/<artifact>/jars/<artifact>-<version>.jar (Spark 4 default)
        cache = home / ".ivy2.5.2" / "cache"
        for org, art, name in [
            ("org.apache.spark", "spark-sql-kafka-0-10_2.12", CONNECTOR_JARS[0]),
            ("org.apache.spark", "spark-token-provider-kafka-0-10_2.12", CONNECTOR_JARS[1]),
            ("org.apache.kafka", "kafka-clients", CONNECTOR_JARS[2]),
            ("org.apache.commons", "commons-pool2", CONNECTOR_JARS[3]),
        ]:
            touch(cache / org / art / "jars", name)
    conn = find_connector(NO_ENV, home=home, version="3.5.9", scala="2.12")
    assert conn.mode == "jars" and "Ivy cache" in conn.source
    names = sorted(j.name for j in conn.jars)
    assert len(names) == 4
    assert not any("3.5.1" in n for n in names)


def test_ivy_cache_prefers_the_dependency_versions_the_connector_asks_for(tmp_path: Path) -> None:
    home = tmp_path / "home"
    touch(home / ".ivy2" / "jars", *[
        "org.apache.spark_spark-sql-kafka-0-10_2.12-3.5.9.jar",
        "org.apache.spark_spark-token-provider-kafka-0-10_2.12-3.5.9.jar",
        "org.apache.kafka_kafka-clients-3.4.1.jar",
        "org.apache.kafka_kafka-clients-3.9.0.jar",  # left by a Spark 4 download
        "org.apache.commons_commons-pool2-2.11.1.jar",
    ])
    desc = home / ".ivy2" / "cache" / "org.apache.spark" / "spark-sql-kafka-0-10_2.12"
    desc.mkdir(parents=True)
    (desc / "ivy-3.5.9.xml").write_text(
        '<dependencies><dependency org="org.apache.kafka" name="kafka-clients" rev="3.4.1" conf="compile"/>'
        '<dependency org="org.apache.commons" name="commons-pool2" rev="2.11.1"/></dependencies>'
    )
    conn = find_connector(NO_ENV, home=home, version="3.5.9", scala="2.12")
    assert "org.apache.kafka_kafka-clients-3.4.1.jar" in [j.name for j in conn.jars]
    (desc / "ivy-3.5.9.xml").unlink()
    conn = find_connector(NO_ENV, home=home, version="3.5.9", scala="2.12")
    assert "org.apache.kafka_kafka-clients-3.9.0.jar" in [j.name for j in conn.jars], "else the newest"


def test_incomplete_ivy_cache_falls_back_to_packages(tmp_path: Path) -> None:
    home = tmp_path / "home"
    touch(home / ".ivy2" / "jars", "org.apache.spark_spark-sql-kafka-0-10_2.12-3.5.9.jar")
    conn = find_connector(NO_ENV, home=home, version="3.5.9", scala="2.12")
    assert conn.mode == "packages"
    assert conn.spark_conf() == {"spark.jars.packages": "org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.9"}
    assert conn.submit_args() == ["--packages", "org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.9"]
    offline = find_connector(NO_ENV, home=home, version="3.5.9", scala="2.12", allow_download=False)
    assert offline.mode == "none" and offline.spark_conf() == {}
    assert ENV_JARS in offline.source and "Maven Central" in offline.source


def test_packages_override_and_spark_submit(tmp_path: Path) -> None:
    home = tmp_path / "home"
    conn = find_connector({"SPARK_KAFKA_PACKAGES": "g:a_2.12:1.0"}, home=home, version="3.5.9", scala="2.12")
    assert conn.packages == "g:a_2.12:1.0"
    assert find_connector({"SPARK_KAFKA_PACKAGES": "none"}, home=home, version="3.5.9", scala="2.12").mode == "none"
    submit = find_connector({"PYSPARK_GATEWAY_PORT": "4242", ENV_JARS: "/nonexistent"}, home=home)
    assert submit.mode == "spark-submit" and submit.spark_conf() == {}


def test_pick_connector_jars_reports_missing() -> None:
    found, missing = pick_connector_jars([Path("/x/kafka-clients-3.4.1.jar")], "3.5.9", "2.12")
    assert [p.name for p in found] == ["kafka-clients-3.4.1.jar"]
    assert missing == [
        "spark-sql-kafka-0-10_2.12-3.5.9",
        "spark-token-provider-kafka-0-10_2.12-3.5.9",
        "commons-pool2",
    ]


# --------------------------------------------------------------------------- commands
COMMANDS = ["device_telemetry", "anomaly_alerts", "replay", "simulate", "demo", "session"]


def test_every_command_has_help() -> None:
    with ThreadPoolExecutor(len(COMMANDS)) as pool:
        results = dict(zip(COMMANDS, pool.map(lambda c: run_module(f"spark_examples.{c}", "--help", timeout=60), COMMANDS), strict=True))
    for name, r in results.items():
        assert r.returncode == 0, f"{name}: {r.stderr}"
        assert f"spark_examples.{name}" in r.stdout
        if name in ("device_telemetry", "anomaly_alerts", "replay"):
            for flag in ("--bootstrap-servers", "--master", "--kafka-jars", "SPARK_KAFKA_JARS"):
                assert flag in r.stdout, f"{name} --help lacks {flag}"
            assert "127.0.0.1:9092" in r.stdout and "local[*]" in r.stdout


def test_session_command_reports_the_connector(tmp_path: Path) -> None:
    touch(tmp_path, *CONNECTOR_JARS)
    r = run_module("spark_examples.session", "--kafka-jars", str(tmp_path), timeout=60)
    assert r.returncode == 0, r.stderr
    assert kafka_package() in r.stdout
    assert f"mode: jars ({ENV_JARS}={tmp_path})" in r.stdout
    assert "spark-submit flags: --jars " in r.stdout
    bad = run_module("spark_examples.session", "--kafka-jars", str(tmp_path / "nope"), timeout=60)
    assert bad.returncode == 2 and "not a directory" in bad.stderr


@pytest.mark.slow
def test_spark_submit_runs_the_examples_and_keeps_its_master() -> None:
    """spark-submit path/to/file.py: imports resolve, spark-submit's --master wins."""
    submit = shutil.which("spark-submit") or str(Path(sys.executable).parent / "spark-submit")
    if not Path(submit).exists():
        pytest.fail("spark-submit not found: pyspark installs it next to python")
    env = {"PYTHONPATH": str(REPO_ROOT), "PYSPARK_PYTHON": sys.executable, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    r = subprocess.run(
        [submit, "--master", "local[1]", "--conf", "spark.ui.enabled=false", "--driver-java-options", TEST_JAVA_OPTIONS,
         str(REPO_ROOT / "spark_examples" / "session.py"), "--check"],
        capture_output=True, text=True, timeout=120, env=env, cwd=str(REPO_ROOT), stdin=subprocess.DEVNULL,
    )
    assert "mode: spark-submit" in r.stdout, r.stdout + r.stderr
    assert "master: local[1]" in r.stdout, r.stdout + r.stderr
    assert re.search(r"format\('kafka'\) available: (yes|no)", r.stdout)
    h = subprocess.run(
        [submit, str(REPO_ROOT / "spark_examples" / "replay.py"), "--help"],
        capture_output=True, text=True, timeout=120, env=env, cwd=str(REPO_ROOT), stdin=subprocess.DEVNULL,
    )
    assert h.returncode == 0 and "--starting-offsets" in h.stdout, h.stderr


# --------------------------------------------------------------------------- replay options
def test_replay_offset_options() -> None:
    assert replay.offset_options("t") == {"subscribe": "t", "startingOffsets": "earliest", "endingOffsets": "latest"}
    o = replay.offset_options("t", partition_offsets=["0=5:10", "2=:"])
    assert json.loads(o["startingOffsets"]) == {"t": {"0": 5, "2": -2}}
    assert json.loads(o["endingOffsets"]) == {"t": {"0": 10, "2": -1}}
    # Spark's source wants every partition it reads named: read only the named ones
    assert json.loads(o["assign"]) == {"t": [0, 2]} and "subscribe" not in o
    o = replay.offset_options("t", since="2026-01-01T00:00:00Z", until="1767225660000", partitions=[0, 1])
    assert json.loads(o["startingOffsetsByTimestamp"]) == {"t": {"0": 1767225600000, "1": 1767225600000}}
    assert json.loads(o["endingOffsetsByTimestamp"]) == {"t": {"0": 1767225660000, "1": 1767225660000}}
    assert json.loads(o["assign"]) == {"t": [0, 1]} and "subscribe" not in o
    assert o["startingOffsetsByTimestampStrategy"] == "latest"
    o = replay.offset_options("t", since="2026-01-01T00:00:00")
    assert o["startingTimestamp"] == "1767225600000"
    assert o["subscribe"] == "t" and "assign" not in o  # a global time covers every partition
    js = '{"t": {"0": 1767225600000}}'
    assert replay.offset_options("t", starting_by_timestamp=js)["startingOffsetsByTimestamp"] == js
    for bad in (
        {"starting_offsets": "latest"},
        {"ending_offsets": "earliest"},
        {"starting_offsets": "{not json"},
        {"starting_offsets": '{"t": 5}'},
        {"partition_offsets": ["x=1:2"]},
        {"partition_offsets": ["0=10:5"]},
        {"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"},
        {"since": "yesterday"},
        {"partition_offsets": ["0=1:2"], "ending_by_timestamp": '{"t": {"1": 1767225600000}}'},
    ):
        with pytest.raises(ValueError):
            replay.offset_options("t", **bad)


def test_replay_rejects_bad_ranges_before_starting_spark() -> None:
    r = run_module("spark_examples.replay", "--starting-offsets", "latest", timeout=60)
    assert r.returncode == 2 and "startingOffsets=latest" in r.stderr


# --------------------------------------------------------------------------- simulator
def test_simulated_readings_are_deterministic_json() -> None:
    a = list(simulate.generate(3, 10, step_ms=1000, end_ms=1_800_000_000_000, seed=7, anomaly_rate=0.2, malformed=2))
    b = list(simulate.generate(3, 10, step_ms=1000, end_ms=1_800_000_000_000, seed=7, anomaly_rate=0.2, malformed=2))
    assert a == b
    good = [r for r in a if r.payload.startswith(b"{")]
    assert len(good) == 30 and len(a) == 32
    bodies = [json.loads(r.payload) for r in good]
    assert {b["device_id"] for b in bodies} == {"sensor-0000", "sensor-0001", "sensor-0002"}
    assert all(b["device_id"] == r.device_id and b["ts"] == r.ts_ms for b, r in zip(bodies, good, strict=True))
    assert max(b["ts"] for b in bodies) <= 1_800_000_000_000 and min(b["ts"] for b in bodies) >= 1_800_000_000_000 - 10_000
    assert any(b["temperature"] >= 80 for b in bodies), "anomaly_rate mixes in overheating readings"
    assert set(bodies[0]) == {"device_id", "ts", "seq", "temperature", "humidity"}


PROBE_SOURCE = """
package probe;

public class FakeKafka implements org.apache.spark.sql.sources.DataSourceRegister {
    public String shortName() { return "kafka"; }
}
"""


@pytest.mark.slow
def test_jars_from_spark_kafka_jars_reach_sparks_data_source_lookup(tmp_path: Path) -> None:
    """The SPARK_KAFKA_JARS route end to end in a real JVM: a probe jar that registers a
    data source named "kafka" is found by the same lookup format('kafka') uses."""
    javac, jar = shutil.which("javac"), shutil.which("jar")
    if not (javac and jar):
        pytest.skip("no JDK (javac, jar) on this machine to build the probe jar")
    src = tmp_path / "src" / "probe"
    src.mkdir(parents=True)
    (src / "FakeKafka.java").write_text(PROBE_SOURCE)
    classes = tmp_path / "classes"
    services = classes / "META-INF" / "services"
    services.mkdir(parents=True)
    (services / "org.apache.spark.sql.sources.DataSourceRegister").write_text("probe.FakeKafka\n")
    # Only the jar that holds DataSourceRegister on javac's classpath, not pyspark's 250: javac
    # reads every jar's index (5.9 s of CPU against 2.6). A one-file compile: C1 only.
    (sql_jar,) = (pyspark_home() / "jars").glob("spark-sql_*.jar")
    subprocess.run([javac, *LIGHT_JVM, "--release", "17", "-cp", str(sql_jar), "-d", str(classes),
                    str(src / "FakeKafka.java")], check=True, capture_output=True)
    jars = tmp_path / "jars"
    jars.mkdir()
    subprocess.run([jar, *LIGHT_JVM, "cf", str(jars / "probe-kafka.jar"), "-C", str(classes), "."], check=True, capture_output=True)

    # no jars anywhere (an empty HOME hides any Ivy cache), no download
    bare = {"SPARK_KAFKA_PACKAGES": "none", ENV_JARS: "", "HOME": str(tmp_path)}
    without = run_module("spark_examples.session", "--check", env=bare, timeout=120)
    assert "format('kafka') available: no" in without.stdout, without.stdout + without.stderr
    with_jars = run_module("spark_examples.session", "--check", env={ENV_JARS: str(jars)}, timeout=120)
    assert f"mode: jars ({ENV_JARS}={jars})" in with_jars.stdout, with_jars.stderr
    assert "format('kafka') available: yes" in with_jars.stdout, with_jars.stdout + with_jars.stderr
    assert with_jars.returncode == 0
