"""Runs the baselines, then each workload on every target in turn, then the MQTT servers.

Each workload runs ``repeats`` times on every target, the targets back to back and in
alternating order (ours first in odd rounds, last in even ones), so slow drift of a
shared machine falls on both sides alike. Every run starts its server afresh in its own
directory, deleted afterwards, so runs are independent and no server carries the
memory or disk of earlier ones. Failure of one run becomes a one-line note and the run
goes on, so a broken peer never costs the figures for ours (and vice versa).
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
from .window import Window
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
    repeats: int = 3
    baseline_seconds: float = 5.0
    baseline_repeats: int = 3
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
    the time per byte adds up, so the ceiling is 1 / (1/loopback + 1/append), computed
    from the medians (and its range from the two ranges' ends).
    """
    by = {b.name: b for b in baselines}
    lo, ap = by.get("loopback-tcp"), by.get("file-append")
    if lo is None or ap is None or min(lo.low, ap.low) <= 0:
        return baselines

    def series(x: float, y: float) -> float:
        return round(1 / (1 / x + 1 / y), 1)

    combined = BaselineResult(
        "append+loopback", 0, 0.0, series(lo.mb_per_s, ap.mb_per_s),
        "derived: 1 / (1/loopback-tcp + 1/file-append), the two copies of a produce in series",
        low=series(lo.low, ap.low), high=series(lo.high, ap.high),
    )  # fmt: skip
    return [*baselines, combined]


#: A server writing more than this to its log in one run is probably logging per
#: request, which slows it: the run gets a note (this caught rumqttd's missing set-up).
LOG_OUTPUT_WARN_BYTES = 1 << 20

Factory = Callable[[Path], Target]


def run(options: RunOptions, progress: Progress = NULL_PROGRESS) -> RunResult:
    """Runs baselines, Kafka targets, MQTT servers; always stops what it started."""
    started = time.perf_counter()
    result = RunResult(started_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
    workdir = Path(tempfile.mkdtemp(prefix="logserver-bench-", dir=options.workdir_parent))
    result.workdir = str(workdir)
    try:
        targets = _available_targets(options, workdir, result)
        mqtt_servers = 0 if options.mqtt is None else 1 + len(options.mqtt_peers)
        mqtt_workloads = 0 if options.mqtt is None else 1 + len(options.mqtt.fanout)
        progress.steps(
            4 + options.repeats * (len(targets) * len(options.workloads)
                                   + mqtt_servers * mqtt_workloads)
        )  # fmt: skip
        if options.baseline_repeats > 0:
            result.baselines = with_combined_baseline(measure_all(
                workdir, options.baseline_seconds, options.baseline_repeats, progress))
        progress.advance(4)
        described: set[str] = set()
        for workload in options.workloads:
            for repeat in range(options.repeats):
                order = targets if repeat % 2 == 0 else targets[::-1]
                for position, (name, role, factory) in enumerate(order, 1):
                    _run_once(name, role, factory, workload, repeat + 1, position, options,
                              workdir, result, progress, described)
        if options.mqtt is not None:
            mqtt = run_suite(workdir, options.mqtt, options.mqtt_peers, progress,
                             bridge=options.bootstrap is None, server_args=options.server_args,
                             repeats=options.repeats)
            result.workloads += mqtt.results
            result.notes += mqtt.notes
            result.targets += mqtt.targets
            if options.bootstrap is None and (
                mqtt.ours_failed or not any(r.target == "bridge" for r in mqtt.results)
            ):
                result.ours_failed = True
    finally:
        result.seconds = round(time.perf_counter() - started, 1)
        if options.keep_workdir:
            log.info("kept work directory %s", workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    result.checks = evaluate(result)
    return result


def _available_targets(
    options: RunOptions, workdir: Path, result: RunResult
) -> list[tuple[str, str, Factory]]:
    """(name, role, factory) for ours then each peer that can be installed."""
    if options.bootstrap:
        bootstrap = options.bootstrap

        def ours(rundir: Path) -> Target:
            return ExternalTarget(bootstrap)
    else:

        def ours(rundir: Path) -> Target:
            return LogserverTarget(rundir, options.server_args)

    targets: list[tuple[str, str, Factory]] = [("logserver", "ours", ours)]
    for name in options.peers:
        factory = PEERS[name]
        try:
            factory(workdir / f"install-{name}")  # installs it on first use; starts nothing
        except (PeerUnavailable, ValueError) as exc:
            result.notes.append(f"{name}: not measured: {exc}")
            result.targets.append({"name": name, "role": "peer", "error": str(exc)})
            continue
        targets.append((name, "peer", factory))
    return targets


def _run_once(
    name: str,
    role: str,
    factory: Factory,
    workload: Workload,
    repeat: int,
    position: int,
    options: RunOptions,
    workdir: Path,
    result: RunResult,
    progress: Progress,
    described: set[str],
) -> None:
    """One run of ``workload`` on a fresh ``name`` server in its own directory."""
    rundir = workdir / f"{name}-{workload.name}-{repeat}"
    rundir.mkdir(parents=True, exist_ok=True)
    target: Target | None = None
    try:
        target = factory(rundir)
        with target:
            assert target.bootstrap is not None
            window = Window(target.cpu_seconds)
            session = Session(name, target.bootstrap, options.settings, progress,
                              rss_mb=target.rss_mb, window=window)
            measured = workload.run(session, workload)
            target.check()
        if not window.closed:
            raise WorkloadError("the workload never closed its measured window")
        measured.metrics.update(window.metrics())
        measured.run, measured.position = repeat, position
        result.workloads.append(measured)
    except (WorkloadError, KafkaException, RawClientError, OSError, TargetError,
            PeerUnavailable) as exc:
        progress.clear()
        reason = exc.args[0] if exc.args else exc
        note = f"{name} {workload.name} run {repeat}: failed: {reason}"
        log.warning("%s", note)
        result.notes.append(note)
        result.ours_failed |= role == "ours"
    finally:
        if target is not None:
            _check_log_output(name, workload.name, repeat, target, result)
            if name not in described:
                described.add(name)
                result.targets.append(target.describe())
                if target.caveat:
                    result.notes.append(f"{name}: {target.caveat}")
        progress.advance()
        if not options.keep_workdir:
            shutil.rmtree(rundir, ignore_errors=True)


def _check_log_output(name: str, workload: str, repeat: int, target: Target,
                      result: RunResult) -> None:
    path = getattr(target, "log_path", None)
    try:
        size = path.stat().st_size if isinstance(path, Path) else 0
    except OSError:
        return
    if size > LOG_OUTPUT_WARN_BYTES:
        note = (f"{name} {workload} run {repeat}: the server wrote {size / 1e6:,.1f} MB of "
                "log output; per-request logging slows a server, check how it is started")
        log.warning("%s", note)
        result.notes.append(note)
