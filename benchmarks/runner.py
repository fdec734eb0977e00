"""Runs the baselines, every Kafka workload against every target, then the MQTT servers.

Failure of one target or workload becomes a one-line note and the run goes on, so a
broken peer never costs the figures for ours (and vice versa).
"""

from __future__ import annotations

import datetime as dt
import logging
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import KafkaException

from .baselines import BaselineResult, measure_all
from .checks import Check, evaluate
from .kafka_raw import RawClientError
from .mqtt_bench import MqttSettings, run_suite
from .peers import PeerUnavailable
from .progress import NULL_PROGRESS, Progress
from .targets import PEERS, ExternalTarget, LogserverTarget, Target, TargetError
from .workloads import Session, Settings, Workload, WorkloadError, WorkloadResult

log = logging.getLogger(__name__)


@dataclass
class RunOptions:
    """Everything a run needs that the command line decides."""

    settings: Settings
    workloads: list[Workload]
    peers: list[str] = field(default_factory=list)
    mqtt: MqttSettings | None = None  # None: no MQTT workloads
    mqtt_peers: list[str] = field(default_factory=list)
    bootstrap: str | None = None
    server_args: list[str] = field(default_factory=list)
    baseline_seconds: float = 1.5
    baseline_repeats: int = 2
    workdir_parent: Path | None = None
    keep_workdir: bool = False
    quick: bool = False


@dataclass
class RunResult:
    """What a run measured, ready for the table, the plots and the JSON file."""

    started_at: str
    seconds: float = 0.0
    workdir: str = ""
    baselines: list[BaselineResult] = field(default_factory=list)
    targets: list[dict[str, object]] = field(default_factory=list)
    workloads: list[WorkloadResult] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Targets whose role is "ours" and that failed at least one workload.
    ours_failed: bool = False

    def roles(self) -> dict[str, str]:
        """Target name -> "ours" or "peer"."""
        return {str(t.get("name")): str(t.get("role")) for t in self.targets}


def with_combined_baseline(baselines: list[BaselineResult]) -> list[BaselineResult]:
    """Adds ``append+loopback``: receive over loopback then append, one after the other.

    A produce request's bytes cross the socket and then go to the file; done in series
    the time per byte adds up, so the ceiling is 1 / (1/loopback + 1/append).
    """
    by = {b.name: b for b in baselines}
    lo, ap = by.get("loopback-tcp"), by.get("file-append")
    if lo is None or ap is None or lo.mb_per_s <= 0 or ap.mb_per_s <= 0:
        return baselines
    rate = 1 / (1 / lo.mb_per_s + 1 / ap.mb_per_s)
    combined = BaselineResult(
        "append+loopback", 0, 0.0, round(rate, 1),
        "derived: 1 / (1/loopback-tcp + 1/file-append), the two copies of a produce in series",
    )  # fmt: skip
    return [*baselines, combined]


def run(options: RunOptions, progress: Progress = NULL_PROGRESS) -> RunResult:
    """Runs baselines, Kafka targets, MQTT servers; always stops what it started."""
    started = time.perf_counter()
    result = RunResult(started_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
    workdir = Path(tempfile.mkdtemp(prefix="logserver-bench-", dir=options.workdir_parent))
    result.workdir = str(workdir)
    factories = _target_factories(options, workdir)
    progress.steps(
        4 + len(factories) * len(options.workloads)
        + (0 if options.mqtt is None else 1 + len(options.mqtt_peers))
    )  # fmt: skip
    try:
        result.baselines = with_combined_baseline(
            measure_all(workdir, options.baseline_seconds, options.baseline_repeats, progress)
        )
        progress.advance(4)
        for make in factories:
            _run_target(make, options, result, progress)
        if options.mqtt is not None:
            mqtt = run_suite(workdir, options.mqtt, options.mqtt_peers, progress,
                             bridge=options.bootstrap is None, server_args=options.server_args)
            result.workloads += mqtt.results
            result.notes += mqtt.notes
            result.targets += mqtt.targets
            if options.bootstrap is None and not any(r.target == "bridge" for r in mqtt.results):
                result.ours_failed = True
    finally:
        result.seconds = round(time.perf_counter() - started, 1)
        if options.keep_workdir:
            log.info("kept work directory %s", workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    result.checks = evaluate(result)
    return result


def _target_factories(
    options: RunOptions, workdir: Path
) -> list[tuple[str, str, Callable[[], Target]]]:
    """(name, role, factory) for ours then each peer; factories may raise PeerUnavailable."""
    if options.bootstrap:
        bootstrap = options.bootstrap

        def ours() -> Target:
            return ExternalTarget(bootstrap)
    else:

        def ours() -> Target:
            return LogserverTarget(workdir, options.server_args)

    factories: list[tuple[str, str, Callable[[], Target]]] = [("logserver", "ours", ours)]
    for name in options.peers:
        factory = PEERS[name]

        def peer(factory: Callable[[Path], Target] = factory) -> Target:
            return factory(workdir)

        factories.append((name, "peer", peer))
    return factories


def _run_target(
    entry: tuple[str, str, Callable[[], Target]],
    options: RunOptions,
    result: RunResult,
    progress: Progress,
) -> None:
    name, role, make = entry
    failed = False
    try:
        target = make()
    except (PeerUnavailable, ValueError) as exc:
        result.notes.append(f"{name}: not measured: {exc}")
        result.targets.append({"name": name, "role": role, "error": str(exc)})
        result.ours_failed |= role == "ours"
        progress.skip(len(options.workloads))
        return
    try:
        with target:
            assert target.bootstrap is not None
            session = Session(name, target.bootstrap, options.settings, progress,
                              rss_mb=target.rss_mb)
            if target.caveat:
                result.notes.append(f"{name}: {target.caveat}")
            for workload in options.workloads:
                target.check()
                try:
                    cpu_before, started = target.cpu_seconds(), time.perf_counter()
                    measured = workload.run(session, workload)
                    cpu_after = target.cpu_seconds()
                    if cpu_before is not None and cpu_after is not None:
                        # Whole workload incl. set-up; the share says whether the server
                        # or the client (same 2 cores) was the bottleneck.
                        wall = time.perf_counter() - started
                        measured.metrics["server_cpu_s"] = round(cpu_after - cpu_before, 2)
                        measured.metrics["server_cpu_share"] = round(
                            (cpu_after - cpu_before) / wall, 3) if wall > 0 else 0.0
                    result.workloads.append(measured)
                except (WorkloadError, KafkaException, RawClientError, OSError) as exc:
                    progress.clear()
                    failed = True
                    reason = exc.args[0] if exc.args else exc
                    note = f"{name} {workload.name}: failed: {reason}"
                    log.warning("%s", note)
                    result.notes.append(note)
                finally:
                    progress.advance()
            target.check()
    except TargetError as exc:
        progress.clear()
        failed = True
        result.notes.append(f"{name}: {exc}")
        log.error("%s: %s", name, exc)
    finally:
        result.targets.append(target.describe())
    result.ours_failed |= failed and role == "ours"
