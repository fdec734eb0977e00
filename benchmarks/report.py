"""The printed table and the machine-readable result file.

Every workload figure is shown as a ratio of the raw baselines measured in the same run
and, on peer rows, as ours / peer, because ratios are what stay comparable across runs
on shared, noisy machines.
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
from .workloads import WorkloadResult

SCHEMA_VERSION = 1
#: Column headings for the baselines in the table (the JSON keeps the full names).
SHORT = {
    "loopback-tcp": "/loopback",
    "file-append": "/append",
    "file-append+fsync": "/append+fsync",
}


def baseline_ratios(w: WorkloadResult, baselines: list[BaselineResult]) -> dict[str, float]:
    """Workload MB/s divided by each baseline's MB/s."""
    return {b.name: round(w.mb_per_s / b.mb_per_s, 4) for b in baselines if b.mb_per_s > 0}


def ours_over_peer(w: WorkloadResult, result: RunResult) -> float | None:
    """For a peer's result, ours / peer in records/s for the same workload (None for ours)."""
    roles = {t.get("name"): t.get("role") for t in result.targets}
    if roles.get(w.target) != "peer" or w.records_per_s <= 0:
        return None
    for o in result.workloads:
        if o.workload == w.workload and roles.get(o.target) == "ours":
            return round(o.records_per_s / w.records_per_s, 3)
    return None


def format_table(result: RunResult, options: RunOptions) -> str:
    """The human-readable report: baselines, then one row per workload and target."""
    lines = ["", "Raw baselines, same run (MB/s = 10^6 bytes/s)"]
    for b in result.baselines:
        lines.append(f"  {b.name:<19} {b.mb_per_s:>10,.1f} MB/s   {b.detail}")

    s = options.settings
    lines += [
        "",
        f"Workloads (confluent-kafka {confluent_kafka.version()}, payload bytes only, "
        f"{s.partitions} partition{'s' if s.partitions != 1 else ''}, acks={s.acks}, "
        f"linger.ms={s.linger_ms})",
    ]
    names = [b.name for b in result.baselines]
    header = f"  {'workload':<14}{'target':<11}{'records/s':>12}{'MB/s':>10}"
    heads = [SHORT.get(n, "/" + n) for n in names]
    widths = [max(len(h) + 2, 10) for h in heads]
    header += "".join(f"{h:>{w}}" for h, w in zip(heads, widths, strict=True))
    header += f"{'ours/peer':>11}"
    lines += [header, "  " + "-" * (len(header) - 2)]

    workloads = list(dict.fromkeys(w.workload for w in result.workloads))
    capped_any = False
    for name in workloads:
        first = True
        for w in (w for w in result.workloads if w.workload == name):
            capped_any |= w.capped
            mark = "*" if w.capped else " "
            row = f"  {name if first else '':<14}{w.target:<11}{w.records_per_s:>11,.0f}{mark}"
            row += f"{w.mb_per_s:>10,.1f}"
            ratios = baseline_ratios(w, result.baselines)
            row += "".join(
                f"{ratios.get(n, 0.0):>{w}.3f}" for n, w in zip(names, widths, strict=True)
            )
            vs = ours_over_peer(w, result)
            row += f"{vs:>11.2f}" if vs is not None else ""
            lines.append(row)
            first = False
    if not result.workloads:
        lines.append("  (no workload completed)")
    if capped_any:
        lines.append(f"  * stopped by the {s.time_cap:g}s time cap before the record count")
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
        vs = ours_over_peer(w, result)
        if vs is not None:
            entry["ours_over_peer_records_per_s"] = vs
        workloads.append(entry)
    s = options.settings
    return {
        "schema_version": SCHEMA_VERSION,
        "started_at": result.started_at,
        "seconds": result.seconds,
        "units": {"mb_per_s": "10^6 payload bytes per second", "seconds": "wall clock"},
        "host": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "confluent_kafka": confluent_kafka.version(),
            "librdkafka": confluent_kafka.libversion()[0],
        },
        "settings": {
            "record_sizes": options.sizes,
            "records": {str(k): v for k, v in s.records.items()},
            "time_cap_s": s.time_cap,
            "partitions": s.partitions,
            "acks": s.acks,
            "linger_ms": s.linger_ms,
            "baseline_seconds": options.baseline_seconds,
            "baseline_repeats": options.baseline_repeats,
            "peers": options.peers,
            "bootstrap": options.bootstrap,
            "server_args": options.server_args,
        },
        "baselines": [b.to_json() for b in result.baselines],
        "targets": result.targets,
        "workloads": workloads,
        "notes": result.notes,
    }


def write_json(path: Path, data: dict[str, object]) -> None:
    """Writes atomically, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)
