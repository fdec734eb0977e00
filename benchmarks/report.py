"""The printed table and the machine-readable result file.

Every workload figure is shown next to each peer's figure for the same workload as a
ratio (ours vs peer, > 1 meaning ours is better, whichever way "better" points), and
throughput figures also as a ratio of the raw baselines measured in the same run,
because ratios are what stay comparable across runs on shared, noisy machines.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path

import confluent_kafka

from .baselines import BaselineResult
from .runner import RunOptions, RunResult
from .workloads import WORKLOADS, WorkloadResult

SCHEMA_VERSION = 2
#: Column headings for the baselines in the table (the JSON keeps the full names).
SHORT = {
    "loopback-tcp": "loopback",
    "sendfile-loopback": "sendfile",
    "file-append": "append",
    "file-append+fsync": "append+fsync",
    "append+loopback": "append+loop",
}
_BASELINES_OF = {w.name: w.baselines for w in WORKLOADS}


def baseline_ratios(w: WorkloadResult, baselines: list[BaselineResult]) -> dict[str, float]:
    """Workload MB/s divided by each baseline's MB/s (throughput workloads only)."""
    if w.mb_per_s <= 0 or w.primary not in ("records_per_s", "mb_per_s"):
        return {}
    return {b.name: round(w.mb_per_s / b.mb_per_s, 4) for b in baselines if b.mb_per_s > 0}


def ours_vs_peer(w: WorkloadResult, result: RunResult) -> float | None:
    """For a peer's result: how much better ours is (> 1: ours better); None for ours."""
    roles = result.roles()
    if roles.get(w.target) != "peer":
        return None
    mine = w.value()
    if not mine:
        return None
    for o in result.workloads:
        if o.workload == w.workload and roles.get(o.target) == "ours":
            theirs = o.value()
            if not theirs:
                return None
            return round(theirs / mine if w.higher_is_better else mine / theirs, 3)
    return None


def _figure(w: WorkloadResult) -> tuple[str, str]:
    """(main figure, detail) as printed."""
    m = w.metrics
    if w.kind in ("latency", "connections"):
        main = f"p99 {m.get('p99_ms', 0):,.2f} ms"
        if w.kind == "latency":
            detail = f"p50 {m.get('p50_ms', 0):.2f} / p999 {m.get('p999_ms', 0):.2f} / max {m.get('max_ms', 0):.1f} ms"
        else:
            detail = (f"p50 {m.get('p50_ms', 0):.3f} ms (alone: p50 {m.get('p50_ms_without', 0):.3f}, "
                      f"p99 {m.get('p99_ms_without', 0):.3f})")
            if "kib_per_connection" in m:
                detail += f"; {m['kib_per_connection']:,.0f} KiB/conn, RSS {m['rss_mb']:,.0f} MB"
        return main, detail
    if w.kind == "mqtt-fanout":
        main = f"{m.get('all_p50_ms', 0):,.1f} ms"
        detail = f"max {m.get('all_max_ms', 0):,.1f} ms, first {m.get('first_p50_ms', 0):,.1f} ms"
        if m.get("rss_mb"):
            detail += f", RSS {m['rss_mb']:,.0f} MB"
        return main, detail
    if w.kind == "mqtt-publish":
        detail = f"{w.records:,} PUBACKs in {w.seconds:.2f}s"
        if w.target == "bridge":
            detail += " (bridge + logserver)"
        return f"{w.records_per_s:,.0f} msg/s", detail
    if w.primary == "mb_per_s":
        return f"{w.mb_per_s:,.0f} MB/s", f"{w.records_per_s:,.0f} records/s"
    detail = f"{w.mb_per_s:,.1f} MB/s"
    if "create_topic_s" in m:
        detail += f", topic created in {m['create_topic_s']:.2f}s"
    if "lag_when_producer_done" in m:
        detail += f", lag {m['lag_when_producer_done']:,.0f} when producer done"
    return f"{w.records_per_s:,.0f} rec/s", detail


def format_table(result: RunResult, options: RunOptions) -> str:
    """The human-readable report: baselines, one row per workload and target, targets."""
    lines = ["", "Raw baselines, same run (MB/s = 10^6 bytes/s)"]
    for b in result.baselines:
        samples = f" (runs: {', '.join(f'{x:,.0f}' for x in b.samples)})" if len(b.samples) > 1 else ""
        lines.append(f"  {b.name:<19} {b.mb_per_s:>10,.1f} MB/s   {b.detail}{samples}")

    lines += [
        "",
        f"Workloads (confluent-kafka {confluent_kafka.version()}; MB/s counts payload bytes "
        "only; 'vs ours' = how many times better ours is than that peer (>1: ours better))",
    ]
    header = f"  {'workload':<26}{'target':<11}{'figure':>17}  {'vs ours':>8}  {'x baseline':<46}detail"
    lines += [header, "  " + "-" * (len(header) + 20)]
    workloads = list(dict.fromkeys(w.workload for w in result.workloads))
    capped_any = False
    for name in workloads:
        first = True
        for w in (w for w in result.workloads if w.workload == name):
            capped_any |= w.capped
            main, detail = _figure(w)
            mark = "*" if w.capped else " "
            vs = ours_vs_peer(w, result)
            ratios = baseline_ratios(w, result.baselines)
            wanted = _BASELINES_OF.get(w.workload, ())
            rtext = " ".join(f"{ratios[b]:.2f} {SHORT.get(b, b)}" for b in wanted if b in ratios)
            share = w.metrics.get("server_cpu_share")
            if share is not None:
                detail += f"; server CPU {share:.0%} of a core"
            row = (f"  {name if first else '':<26}{w.target:<11}{main:>16}{mark}  "
                   f"{f'{vs:.2f}' if vs is not None else '':>8}  {rtext:<46}{detail}")
            lines.append(row.rstrip())
            first = False
    if not result.workloads:
        lines.append("  (no workload completed)")
    if capped_any:
        lines.append(f"  * stopped by the time cap ({options.settings.time_cap:g}s) before its count")
    if result.checks:
        lines += ["", "Targets (issue 7), judged on this run's figures"]
        for c in result.checks:
            value = "-" if c.value is None else f"{c.value:,.2f}"
            bar = "-" if c.threshold is None else f"{c.threshold:,.2f}"
            lines.append(f"  {c.verdict:<5} {c.name:<52} {value:>12} vs {bar:>12} {c.unit}")
            if c.detail:
                lines.append(f"        {c.detail}")
    if result.notes:
        lines += ["", "Notes"] + [f"  - {n}" for n in result.notes]
    lines.append(f"\nTotal {result.seconds:.0f}s.")
    return "\n".join(lines)


def to_json(result: RunResult, options: RunOptions) -> dict[str, object]:
    """The result file's content (schema_version bumps on incompatible change)."""
    workloads = []
    for w in result.workloads:
        entry = w.to_json()
        entry["ratios"] = baseline_ratios(w, result.baselines)
        vs = ours_vs_peer(w, result)
        if vs is not None:
            entry["ours_vs_peer"] = vs
        workloads.append(entry)
    s = options.settings
    return {
        "schema_version": SCHEMA_VERSION,
        "started_at": result.started_at,
        "seconds": result.seconds,
        "units": {
            "mb_per_s": "10^6 payload bytes per second",
            "seconds": "wall clock",
            "ours_vs_peer": "> 1: ours better (more per second, or less latency/memory)",
        },
        "host": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "confluent_kafka": confluent_kafka.version(),
            "librdkafka": confluent_kafka.libversion()[0],
        },
        "settings": {
            "quick": options.quick,
            "workloads": [w.name for w in options.workloads],
            "records": {str(k): v for k, v in s.records.items()},
            "time_cap_s": s.time_cap,
            "linger_ms": s.linger_ms,
            "catchup_bytes": s.catchup_bytes,
            "e2e_rate": s.e2e_rate,
            "e2e_seconds": s.e2e_seconds,
            "idle_connections": s.idle_connections,
            "baseline_seconds": options.baseline_seconds,
            "baseline_repeats": options.baseline_repeats,
            "peers": options.peers,
            "mqtt_peers": options.mqtt_peers,
            "mqtt": None if options.mqtt is None else vars(options.mqtt),
            "bootstrap": options.bootstrap,
            "server_args": options.server_args,
        },
        "baselines": [b.to_json() for b in result.baselines],
        "targets": result.targets,
        "workloads": workloads,
        "checks": [c.to_json() for c in result.checks],
        "notes": result.notes,
    }


def write_json(path: Path, data: dict[str, object]) -> None:
    """Writes atomically, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    tmp.replace(path)
