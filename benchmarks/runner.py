"""Runs the baselines, then every workload against every target, collecting results.

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
from .peers import PeerUnavailable
from .progress import NULL_PROGRESS, Progress
from .targets import PEERS, ExternalTarget, LogserverTarget, Target, TargetError
from .workloads import WORKLOADS, Session, Settings, WorkloadError, WorkloadResult, size_label

log = logging.getLogger(__name__)


@dataclass
class RunOptions:
    """Everything a run needs that the command line decides."""

    settings: Settings
    sizes: list[int]
    peers: list[str] = field(default_factory=list)
    bootstrap: str | None = None
    server_args: list[str] = field(default_factory=list)
    baseline_seconds: float = 1.5
    baseline_repeats: int = 2
    workdir_parent: Path | None = None
    keep_workdir: bool = False


@dataclass
class RunResult:
    """What a run measured, ready for the table and the JSON file."""

    started_at: str
    seconds: float = 0.0
    workdir: str = ""
    baselines: list[BaselineResult] = field(default_factory=list)
    targets: list[dict[str, object]] = field(default_factory=list)
    workloads: list[WorkloadResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Targets whose role is "ours" and that failed at least one workload.
    ours_failed: bool = False


def run(options: RunOptions, progress: Progress = NULL_PROGRESS) -> RunResult:
    """Runs baselines then all targets; always stops what it started and removes its files."""
    started = time.perf_counter()
    result = RunResult(started_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
    workdir = Path(tempfile.mkdtemp(prefix="logserver-bench-", dir=options.workdir_parent))
    result.workdir = str(workdir)
    try:
        result.baselines = measure_all(
            workdir, options.baseline_seconds, options.baseline_repeats, progress
        )
        for make in _target_factories(options, workdir):
            _run_target(make, options, result, progress)
    finally:
        result.seconds = round(time.perf_counter() - started, 1)
        if options.keep_workdir:
            log.info("kept work directory %s", workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
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
        return
    try:
        with target:
            assert target.bootstrap is not None
            session = Session(name, target.bootstrap, options.settings, progress)
            if target.caveat:
                result.notes.append(f"{name}: {target.caveat}")
            for size in options.sizes:
                for kind, workload in WORKLOADS:
                    target.check()
                    try:
                        result.workloads.append(workload(session, size))
                    except (WorkloadError, KafkaException) as exc:
                        progress.clear()
                        failed = True
                        reason = exc.args[0] if exc.args else exc
                        note = f"{name} {kind}-{size_label(size)}: failed: {reason}"
                        log.warning("%s", note)
                        result.notes.append(note)
            target.check()
    except TargetError as exc:
        progress.clear()
        failed = True
        result.notes.append(f"{name}: {exc}")
        log.error("%s: %s", name, exc)
    finally:
        result.targets.append(target.describe())
    result.ours_failed |= failed and role == "ours"
