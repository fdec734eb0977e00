"""Build a SparkSession that has Spark's Kafka connector on its classpath.

The ``format("kafka")`` source and sink are not inside the pyspark wheel: they live in
``spark-sql-kafka-0-10`` (plus ``kafka-clients``, ``commons-pool2`` and
``spark-token-provider-kafka-0-10``). This module finds them, in this order:

1. Under ``spark-submit`` the JVM already exists: whatever ``--packages``/``--jars`` the
   user gave it is used, and nothing is added here.
2. ``SPARK_KAFKA_JARS=/dir`` (or ``--kafka-jars DIR``): every ``*.jar`` in that directory
   goes into ``spark.jars``. This is the offline route (machines without Maven Central).
3. The jars already in the local Ivy cache (``~/.ivy2`` for Spark 3.x, ``~/.ivy2.5.2``
   for Spark 4.x) from an earlier ``spark.jars.packages`` download: used as local jars,
   so no network is needed on later runs.
4. Otherwise ``spark.jars.packages=org.apache.spark:spark-sql-kafka-0-10_<scala>:<spark>``,
   the coordinates matched to the installed pyspark (Scala version read from the
   ``scala-library-*.jar`` shipped in pyspark's ``jars/`` directory): pyspark 3.5.x is
   built for Scala 2.12 (``spark-sql-kafka-0-10_2.12:3.5.9``), pyspark 4.x for Scala 2.13
   (``spark-sql-kafka-0-10_2.13:4.0.1``); a connector of another Scala or Spark line
   fails at run time. Spark downloads
   them from Maven Central at start-up. ``SPARK_KAFKA_PACKAGES`` overrides the
   coordinates; ``SPARK_KAFKA_PACKAGES=none`` turns this step off.

``python -m spark_examples.session`` prints what was found and the matching
``spark-submit`` flags; ``--check`` also starts a session and probes the source.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import socket
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

ENV_JARS = "SPARK_KAFKA_JARS"
LOCAL_SHUFFLE_PARTITIONS = 4
ENV_PACKAGES = "SPARK_KAFKA_PACKAGES"
KAFKA_ARTIFACT = "spark-sql-kafka-0-10"
TOKEN_ARTIFACT = "spark-token-provider-kafka-0-10"


class ConnectorError(RuntimeError):
    """Spark's Kafka connector is not available (the message says why and what to do)."""


# --------------------------------------------------------------------------- versions
def pyspark_home() -> Path:
    """The Spark home in use: ``SPARK_HOME`` (set by spark-submit) when it has ``jars/``,
    else the installed pyspark package directory (whose ``jars/`` holds Spark's jars)."""
    home = os.environ.get("SPARK_HOME")
    if home and (Path(home) / "jars").is_dir():
        return Path(home).resolve()
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def spark_version(text: str | None = None) -> str:
    """Installed pyspark version (or ``text``) without local/dev suffixes: '3.5.9', '4.0.1'."""
    if text is None:
        import pyspark

        text = pyspark.__version__
    m = re.match(r"\d+\.\d+\.\d+", text)
    if not m:
        raise ConnectorError(f"cannot read a Spark version from pyspark {text!r}")
    return m.group(0)


def scala_binary_version(jars_dir: Path | None = None) -> str:
    """'2.12' or '2.13', from the ``scala-library-X.Y.Z.jar`` pyspark ships."""
    jars_dir = jars_dir if jars_dir is not None else pyspark_home() / "jars"
    for jar in sorted(jars_dir.glob("scala-library-*.jar")):
        m = re.match(r"scala-library-(\d+\.\d+)\.\d+\.jar$", jar.name)
        if m:
            return m.group(1)
    # Fall back on spark-core_<scala>-<version>.jar, present in every distribution.
    for jar in sorted(jars_dir.glob("spark-core_*.jar")):
        m = re.match(r"spark-core_(\d+\.\d+)-", jar.name)
        if m:
            return m.group(1)
    raise ConnectorError(f"no scala-library-*.jar or spark-core_*.jar in {jars_dir}")


def kafka_package(version: str | None = None, scala: str | None = None) -> str:
    """Maven coordinates of the Kafka connector matching the installed pyspark."""
    version = version or spark_version()
    scala = scala or scala_binary_version()
    return f"org.apache.spark:{KAFKA_ARTIFACT}_{scala}:{version}"


# --------------------------------------------------------------------------- finding jars
@dataclass
class Connector:
    """How the session gets the Kafka connector, and why (``source`` is for people)."""

    mode: str  # "jars" | "packages" | "spark-submit" | "none"
    source: str
    jars: list[Path] = field(default_factory=list)
    packages: str | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def local(self) -> bool:
        """True when the jars are on this machine (no download at start-up)."""
        return self.mode == "jars"

    def spark_conf(self) -> dict[str, str]:
        """The Spark settings that put the connector on the classpath at JVM start."""
        if self.mode == "jars":
            return {"spark.jars": ",".join(str(j) for j in self.jars)}
        if self.mode == "packages" and self.packages:
            return {"spark.jars.packages": self.packages}
        return {}

    def submit_args(self) -> list[str]:
        """The same as ``spark-submit`` flags."""
        if self.mode == "jars":
            return ["--jars", ",".join(str(j) for j in self.jars)]
        if self.mode == "packages" and self.packages:
            return ["--packages", self.packages]
        return []


def _jar_patterns(version: str, scala: str) -> dict[str, re.Pattern[str]]:
    """Required artifact -> file-name pattern (plain Maven names and Ivy 'org_name' names)."""
    v, s = re.escape(version), re.escape(scala)
    return {
        f"{KAFKA_ARTIFACT}_{scala}-{version}": re.compile(rf"(^|_){KAFKA_ARTIFACT}_{s}-{v}\.jar$"),
        f"{TOKEN_ARTIFACT}_{scala}-{version}": re.compile(rf"(^|_){TOKEN_ARTIFACT}_{s}-{v}\.jar$"),
        "kafka-clients": re.compile(r"(^|_)kafka-clients-\d[\w.-]*\.jar$"),
        "commons-pool2": re.compile(r"(^|_)commons-pool2-\d[\w.-]*\.jar$"),
    }


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", path.name))


def pick_connector_jars(
    candidates: list[Path], version: str, scala: str, wanted: Mapping[str, str] | None = None
) -> tuple[list[Path], list[str]]:
    """The connector's jars among ``candidates`` and the names missing. Of several versions
    of a dependency, the one in ``wanted`` (artifact -> version) is taken, else the newest."""
    found: list[Path] = []
    missing: list[str] = []
    for name, pattern in _jar_patterns(version, scala).items():
        hits = sorted((p for p in candidates if pattern.search(p.name)), key=_version_key)
        exact = [p for p in hits if wanted and name in wanted and p.name.endswith(f"{name}-{wanted[name]}.jar")]
        if exact or hits:
            found.append((exact or hits)[-1])
        else:
            missing.append(name)
    return found, missing


def ivy_wanted_versions(ivy: Path, version: str, scala: str) -> dict[str, str]:
    """Dependency versions the cached connector's own Ivy descriptor asks for, if cached."""
    xml = ivy / "cache" / "org.apache.spark" / f"{KAFKA_ARTIFACT}_{scala}" / f"ivy-{version}.xml"
    try:
        text = xml.read_text(errors="replace")
    except OSError:
        return {}
    out: dict[str, str] = {}
    for name in ("kafka-clients", "commons-pool2"):
        m = re.search(rf'name="{name}"[^>]*\brev="([^"]+)"', text)
        if m:
            out[name] = m.group(1)
    return out


def ivy_dirs(home: Path | None = None) -> list[Path]:
    """Ivy homes spark-submit uses by default (Spark 3.x, then Spark 4.x)."""
    home = home if home is not None else Path.home()
    return [home / ".ivy2", home / ".ivy2.5.2"]


def ivy_candidates(ivy: Path) -> list[Path]:
    """Jars Ivy left behind: the retrieved copies in ``jars/`` and the ``cache/`` layout."""
    out = list(ivy.glob("jars/*.jar"))
    out += list(ivy.glob("cache/*/*/jars/*.jar"))
    return out


def find_connector(
    env: Mapping[str, str] | None = None,
    *,
    jars_dir: str | Path | None = None,
    packages: str | None = None,
    home: Path | None = None,
    allow_download: bool = True,
    version: str | None = None,
    scala: str | None = None,
) -> Connector:
    """Decide how to get the connector (see the module docstring for the order).

    ``allow_download=False`` never answers "packages": tests use it so that a machine
    without Maven access reports "none" with the reason instead of failing at start-up.
    """
    env = os.environ if env is None else env
    if env.get("PYSPARK_GATEWAY_PORT"):
        return Connector("spark-submit", "the JVM was started by spark-submit: its --packages/--jars are used")
    version = version or spark_version()
    scala = scala or scala_binary_version()
    coords = kafka_package(version, scala)

    explicit = jars_dir if jars_dir is not None else env.get(ENV_JARS)
    if explicit:
        d = Path(explicit).expanduser()
        if not d.is_dir():
            raise ConnectorError(f"{ENV_JARS}={explicit}: not a directory")
        jars = sorted(d.glob("*.jar"))
        if not jars:
            raise ConnectorError(f"{ENV_JARS}={explicit}: no *.jar files in it")
        picked, missing = pick_connector_jars(jars, version, scala)
        conn = Connector("jars", f"{ENV_JARS}={d}", jars=jars)
        if any(m.startswith(KAFKA_ARTIFACT) for m in missing):
            others = [j.name for j in jars if KAFKA_ARTIFACT in j.name]
            conn.warnings.append(
                f"{d} has no {KAFKA_ARTIFACT}_{scala}-{version}.jar (pyspark {version}, Scala {scala})"
                + (f"; found {', '.join(others)}: a version mismatch fails at run time" if others else "")
            )
        for m in missing:
            if not m.startswith(KAFKA_ARTIFACT):
                conn.warnings.append(f"{d} has no {m} jar: the Kafka source needs it")
        return conn

    for ivy in ivy_dirs(home):
        wanted = ivy_wanted_versions(ivy, version, scala)
        picked, missing = pick_connector_jars(ivy_candidates(ivy), version, scala, wanted)
        if not missing:
            return Connector("jars", f"Ivy cache {ivy}", jars=picked)

    override = packages if packages is not None else env.get(ENV_PACKAGES)
    if override and override.lower() == "none":
        return Connector("none", f"{ENV_PACKAGES}=none and no local jars ({_where_looked(home, version, scala)})")
    if not allow_download:
        return Connector(
            "none",
            f"{ENV_JARS} is not set and {_where_looked(home, version, scala)}; downloading "
            f"{coords} (spark.jars.packages) needs Maven Central",
        )
    return Connector(
        "packages",
        f"spark.jars.packages (downloaded from Maven Central on first use into {ivy_dirs(home)[0]})",
        packages=override or coords,
    )


def _where_looked(home: Path | None, version: str, scala: str) -> str:
    dirs = " and ".join(str(d) for d in ivy_dirs(home))
    return f"{dirs} hold no complete {KAFKA_ARTIFACT}_{scala}-{version} connector"


def maven_resolvable(host: str = "repo1.maven.org", timeout_s: float = 3.0) -> bool:
    """Whether Maven Central's name resolves (or a proxy is configured): a cheap hint that
    spark.jars.packages can download, checked before paying for a failing JVM start."""
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")):
        return True
    result: list[bool] = []

    def lookup() -> None:
        try:
            socket.getaddrinfo(host, 443)
            result.append(True)
        except OSError:
            result.append(False)

    t = threading.Thread(target=lookup, daemon=True)
    t.start()
    t.join(timeout_s)
    return bool(result and result[0])


# --------------------------------------------------------------------------- the session
def under_spark_submit(env: Mapping[str, str] | None = None) -> bool:
    """True when this Python process was started by spark-submit (the JVM already runs)."""
    env = os.environ if env is None else env
    return bool(env.get("PYSPARK_GATEWAY_PORT"))


def build_session(
    app_name: str,
    *,
    master: str | None = None,
    connector: Connector | None = None,
    conf: Mapping[str, str] | None = None,
    log_level: str = "WARN",
) -> SparkSession:
    """A SparkSession with the connector (``connector=None``: none added) and UTC time.

    ``master=None`` means ``local[*]``, except under spark-submit, where the master given
    to spark-submit must win (a builder master would silently override it).
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    submit = under_spark_submit()
    if master is None and not submit:
        master = "local[*]"
    if master is not None:
        builder = builder.master(master)
    settings: dict[str, str] = {
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.showConsoleProgress": "false",
    }
    if master is not None and master.startswith("local"):
        # One machine: bind to loopback rather than whatever the hostname resolves to, and
        # a few shuffle partitions instead of 200 (each one is a task and, for streaming
        # aggregations, a state store per micro-batch; fixed in the checkpoint once chosen).
        settings.update({
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.sql.shuffle.partitions": str(LOCAL_SHUFFLE_PARTITIONS),
        })
    if connector is not None and not submit:
        for w in connector.warnings:
            log.warning("Kafka connector: %s", w)
        settings.update(connector.spark_conf())
        log.info("Kafka connector: %s (%s)", connector.mode, connector.source)
    settings.update(conf or {})
    for k, v in settings.items():
        builder = builder.config(k, v)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:
        if connector is not None and connector.mode == "packages" and "JAVA_GATEWAY_EXITED" in str(exc):
            raise ConnectorError(
                f"Spark could not start, most likely because it could not download {connector.packages} "
                f"(spark.jars.packages needs Maven Central). Put the connector jars in a directory "
                f"and set {ENV_JARS}=/that/dir, or pass --kafka-jars DIR."
            ) from exc
        raise
    spark.sparkContext.setLogLevel(log_level)
    return spark


def has_kafka_source(spark: SparkSession) -> bool:
    """Whether ``format("kafka")`` resolves in this JVM (checked without any broker)."""
    jvm = spark.sparkContext._jvm  # noqa: SLF001 - py4j is the only way to ask the JVM
    try:
        # Spark's own lookup (the one format("kafka") uses), so the answer cannot differ.
        jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            "kafka", spark._jsparkSession.sessionState().conf()  # noqa: SLF001
        )
        return True
    except Exception:  # noqa: BLE001 - py4j wraps Spark's "Failed to find data source"
        return False


def require_kafka_source(spark: SparkSession, connector: Connector | None) -> None:
    """Fail early, with the fix, when the Kafka connector is not on the classpath."""
    if has_kafka_source(spark):
        return
    how = connector.source if connector is not None else "no connector configured"
    raise ConnectorError(
        f"Spark's Kafka source is not on the classpath ({how}). Either let Spark download "
        f"{kafka_package()} (spark.jars.packages, needs Maven Central) or set "
        f"{ENV_JARS}=/dir with spark-sql-kafka-0-10, spark-token-provider-kafka-0-10, "
        f"kafka-clients and commons-pool2 jars (or pass --kafka-jars DIR)."
    )


# --------------------------------------------------------------------------- CLI
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m spark_examples.session",
        description="Show how Spark's Kafka connector will be found for the installed pyspark.",
        epilog=f"Environment: {ENV_JARS}=/dir (local jars), {ENV_PACKAGES}=coords|none.",
    )
    p.add_argument("--kafka-jars", metavar="DIR", help=f"directory of connector jars (overrides {ENV_JARS})")
    p.add_argument("--check", action="store_true", help="also start a local session and check format('kafka') loads")
    p.add_argument("--master", default=None, help="Spark master for --check (default local[1])")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    print(f"pyspark {spark_version()} (Scala {scala_binary_version()}) at {pyspark_home()}")
    print(f"connector coordinates: {kafka_package()}")
    try:
        conn = find_connector(jars_dir=args.kafka_jars)
    except ConnectorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"mode: {conn.mode} ({conn.source})")
    for j in conn.jars:
        print(f"  jar: {j}")
    for w in conn.warnings:
        print(f"  warning: {w}")
    if conn.submit_args():
        print("spark-submit flags: " + " ".join(conn.submit_args()))
    if not args.check:
        return 0
    try:
        master = args.master or (None if under_spark_submit() else "local[1]")
        spark = build_session("connector-check", master=master, connector=conn)
    except ConnectorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        ok = has_kafka_source(spark)
        print(f"master: {spark.sparkContext.master}")
        print(f"format('kafka') available: {'yes' if ok else 'no'}")
        return 0 if ok else 1
    finally:
        spark.stop()


if __name__ == "__main__":
    raise SystemExit(main())
