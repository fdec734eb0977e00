"""Command-line pieces every pipeline shares: flags, logging, progress, query loop.

Kept apart from the pipelines so each ``python -m spark_examples.<name> --help`` reads
the same and so the streaming loop (progress, timeout, Ctrl-C) is written once.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from .session import (
    ENV_JARS,
    ENV_PACKAGES,
    Connector,
    ConnectorError,
    find_connector,
    maven_resolvable,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger("spark_examples")

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

CONNECTOR_EPILOG = (
    "Kafka connector: Spark's format('kafka') needs the spark-sql-kafka-0-10 jars. By default "
    "they are taken from the local Ivy cache, else downloaded via spark.jars.packages with "
    f"coordinates matched to the installed pyspark. Offline: {ENV_JARS}=/dir (or --kafka-jars "
    f"DIR) puts every *.jar of DIR on the classpath; {ENV_PACKAGES} overrides the coordinates. "
    "Under spark-submit, its own --packages/--jars/--master are used."
)


def add_common_args(p: argparse.ArgumentParser) -> None:
    """--bootstrap-servers, --master, connector and logging flags."""
    p.add_argument(
        "--bootstrap-servers",
        default=DEFAULT_BOOTSTRAP,
        metavar="HOST:PORT[,...]",
        help=f"the log: logserver or any Kafka cluster (default {DEFAULT_BOOTSTRAP})",
    )
    p.add_argument(
        "--master",
        default=None,
        help="Spark master (default local[*]; under spark-submit, spark-submit's --master)",
    )
    p.add_argument("--kafka-jars", metavar="DIR", default=None, help=f"connector jars directory (overrides {ENV_JARS})")
    p.add_argument(
        "--kafka-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra Kafka client setting for source and sink, e.g. security.protocol=SASL_SSL (repeatable)",
    )
    p.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)
    logging.getLogger("kafka").setLevel(logging.WARNING)


def kafka_options(args: argparse.Namespace) -> dict[str, str]:
    """``kafka.*`` options for format('kafka'): bootstrap servers plus --kafka-option."""
    opts = {"kafka.bootstrap.servers": args.bootstrap_servers}
    for item in args.kafka_option:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"--kafka-option {item!r}: expected NAME=VALUE")
        opts[name if name.startswith("kafka.") else f"kafka.{name}"] = value
    return opts


def connector_from_args(args: argparse.Namespace) -> Connector:
    """The connector for --kafka-jars / the environment; warns when a download looks doomed."""
    try:
        conn = find_connector(jars_dir=args.kafka_jars)
    except ConnectorError as exc:
        raise SystemExit(f"error: {exc}") from exc
    if conn.mode == "packages" and not maven_resolvable():
        log.warning(
            "Spark will try to download %s, but Maven Central does not resolve from this machine; "
            "if that fails, put the connector jars in a directory and set %s=/that/dir",
            conn.packages, ENV_JARS,
        )
    return conn


def spark_log_level(level: str) -> str:
    return {"DEBUG": "INFO", "INFO": "WARN", "WARNING": "WARN", "ERROR": "ERROR"}[level]


class Progress:
    """A one-line progress display on a terminal, periodic log lines otherwise."""

    def __init__(self, label: str, total: int | None = None, *, stream: TextIO | None = None, every_s: float = 2.0) -> None:
        self.label = label
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self.every_s = every_s
        self.start = time.monotonic()
        self._last = 0.0
        self._shown: int | None = None
        self.value = 0

    def update(self, value: int, note: str = "") -> None:
        self.value = value
        now = time.monotonic()
        if not self.tty and now - self._last < self.every_s:
            return
        self._last = now
        self._emit(note)

    def _emit(self, note: str, end: str = "") -> None:
        self._shown = self.value
        elapsed = time.monotonic() - self.start
        rate = self.value / elapsed if elapsed > 0 else 0.0
        of = f"/{self.total}" if self.total else ""
        pct = f" {100 * self.value / self.total:5.1f}%" if self.total else ""
        text = f"{self.label}: {self.value}{of}{pct} ({rate:.0f}/s, {elapsed:.1f}s){' ' + note if note else ''}"
        if self.tty:
            self.stream.write("\r\033[K" + text + end)
            self.stream.flush()
        else:
            log.info("%s", text)

    def done(self, note: str = "") -> None:
        if self.tty or self._shown != self.value or note:
            self._emit(note, end="\n")


def run_queries(
    spark: SparkSession,
    queries: Sequence[StreamingQuery],
    *,
    timeout_s: float | None = None,
) -> int:
    """Wait for streaming queries with a progress line; stop them on timeout or Ctrl-C.

    Returns 0 when every query ended by itself or by timeout/Ctrl-C, 1 if one failed.
    """
    prog = Progress("streaming " + ", ".join(q.name or q.id for q in queries))
    deadline = time.monotonic() + timeout_s if timeout_s else None
    rows = 0
    seen: set[tuple[str, int]] = set()
    try:
        while any(q.isActive for q in queries):
            for q in queries:
                for p in q.recentProgress:
                    if (q.id, p["batchId"]) not in seen:
                        seen.add((q.id, p["batchId"]))
                        rows += int(p.get("numInputRows") or 0)
            active = [q for q in queries if q.isActive]
            prog.update(rows, f"input rows; {len(active)} active")
            if deadline is not None and time.monotonic() > deadline:
                log.info("timeout after %.0fs: stopping the queries", timeout_s)
                break
            time.sleep(0.5)
    except KeyboardInterrupt:
        log.info("interrupted: stopping the queries")
    finally:
        for q in queries:
            if q.isActive:
                q.stop()
    prog.done("input rows")
    failed = 0
    for q in queries:
        exc = q.exception()
        if exc is not None:
            log.error("query %s failed: %s", q.name, exc)
            failed += 1
    return 1 if failed else 0
