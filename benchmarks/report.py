"""The printed table and the machine-readable result file.

Every figure is the median of its runs with the range beside it (``median [min-max]``).
Each peer's row says how ours compares with it: the ratio of medians (> 1 meaning ours
is better, whichever way "better" points) and a verdict, "even" whenever the two ranges
overlap (``stats.compare``). Throughput medians are also shown as a ratio of the raw
baselines' medians measured in the same run, because ratios are what stay comparable
across runs on shared, noisy machines.
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
from .stats import Spread, spread_text
from .summary import Summary, ours_of, summarize, versus
from .workloads import WORKLOADS

SCHEMA_VERSION = 3
#: Column headings for the baselines in the table (the JSON keeps the full names).
SHORT = {
    "loopback-tcp": "loopback",
    "sendfile-loopback": "sendfile",
    "file-append": "append",
    "file-append+fsync": "append+fsync",
    "append+loopback": "append+loop",
}
BASELINES_OF = {w.name: w.baselines for w in WORKLOADS}


def baseline_ratios(s: Summary, baselines: list[BaselineResult]) -> dict[str, float]:
    """Median MB/s divided by each baseline's median MB/s (throughput workloads only)."""
    mb = s.spread("mb_per_s")
    if mb is None or mb.median <= 0 or s.primary not in ("records_per_s", "mb_per_s"):
        return {}
    return {b.name: round(mb.median / b.mb_per_s, 4) for b in baselines if b.mb_per_s > 0}


def figure_text(kind: str, primary: str, f: dict[str, Spread]) -> str:
    """The compared figure, ``median [min-max] unit``."""
    p = f.get(primary)
    if p is None:
        return "-"
    if kind in ("latency", "connections"):
        return spread_text(p, 2, "ms p99")
    if kind == "mqtt-fanout":
        return spread_text(p, 0, "ms to all")
    if kind == "mqtt-publish":
        return spread_text(p, 0, "msg/s")
    if primary == "mb_per_s":
        return spread_text(p, 0, "MB/s")
    return spread_text(p, 0, "rec/s")


def detail_text(kind: str, primary: str, f: dict[str, Spread]) -> str:
    """The other figures of a row, each ``median [min-max]``."""
    parts: list[str] = []

    def add(name: str, label: str, digits: int = 0, unit: str = "") -> None:
        if name in f:
            parts.append(f"{label}{spread_text(f[name], digits, unit)}")

    if kind == "latency":
        add("p50_ms", "p50 ", 2, "ms")
        add("p999_ms", "p999 ", 2, "ms")
        if "fetch_wait_max_ms" in f:
            parts.append(f"consumer fetch.wait.max.ms {f['fetch_wait_max_ms'].median:,.0f}")
    elif kind == "connections":
        add("p99_ms_without", "p99 alone ", 2, "ms")
        add("kib_per_connection", "", 0, "KiB/conn")
    elif kind == "mqtt-fanout":
        add("all_max_ms", "slowest ", 0, "ms")
        add("rss_mb", "RSS ", 0, "MB")
        if "notices_failed" in f and f["notices_failed"].high > 0:
            add("notices_failed", "notices that never reached every device: ", 0)
    elif kind != "mqtt-publish":
        if primary == "mb_per_s":
            add("records_per_s", "", 0, "rec/s")
        else:
            add("mb_per_s", "", 0, "MB/s")
        add("create_topic_s", "topic created in ", 2, "s")
        add("lag_at_window_end", "lag ", 0, "at window end")
    if "server_cpu_share" in f:
        c = f["server_cpu_share"]
        parts.append(f"CPU {c.median:.0%} [{c.low:.0%}-{c.high:.0%}]")
    return ", ".join(parts)


def format_table(result: RunResult, options: RunOptions) -> str:
    """The human-readable report: baselines, one row per workload and target, targets."""
    lines = [""]
    if result.baselines:
        lines.append(f"Raw baselines, same run (MB/s = 10^6 bytes/s; median [min-max] of "
                     f"{options.baseline_repeats} runs of {options.baseline_seconds:g}s)")
    for b in result.baselines:
        lines.append(f"  {b.name:<19} {b.mb_per_s:>10,.0f} [{b.low:,.0f}-{b.high:,.0f}] MB/s   "
                     f"{b.detail}")
    s = options.settings
    lines += [
        "",
        f"Workloads (confluent-kafka {confluent_kafka.version()}): each figure is the median "
        f"[min-max] of {options.repeats} runs, each on a fresh server, {s.warmup_s:g}s "
        f"warm-up then a {s.measure_s:g}s measured window; the servers back to back in "
        "alternating order. 'vs ours': ratio of medians (>1: ours better), 'even' when the "
        "ranges overlap. CPU: the server's share of one core over the window.",
    ]
    header = f"  {'workload':<24}{'target':<11}{'figure':>38}  {'vs ours':<18}{'x baseline':<48}detail"
    lines += [header, "  " + "-" * (len(header) + 30)]
    summaries = summarize(result.workloads, result.roles())
    first_of: set[str] = set()
    for sm in summaries:
        name = sm.workload
        f = sm.figures()
        vs = versus(sm, ours_of(summaries, name))
        ratios = baseline_ratios(sm, result.baselines)
        wanted = BASELINES_OF.get(name, ())
        rtext = " ".join(f"{ratios[b]:.2f} {SHORT.get(b, b)}" for b in wanted if b in ratios)
        detail = detail_text(sm.kind, sm.primary, f)
        if sm.failed_runs:
            detail += f"; {sm.failed_runs} of {len(sm.runs)} runs incomplete (see notes)"
        if len(sm.runs) < options.repeats:
            detail += f"; only {len(sm.runs)} of {options.repeats} runs succeeded"
        label = "" if name in first_of else name
        first_of.add(name)
        row = (f"  {label:<24}{sm.target:<11}{figure_text(sm.kind, sm.primary, f):>38}  "
               f"{vs.text() if vs else '':<18}{rtext:<48}{detail}")
        lines.append(row.rstrip())
    if not result.workloads:
        lines.append("  (no workload completed)")
    if result.checks:
        lines += ["", "Targets (issue 7), judged on this run's medians"]
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
    summaries = summarize(result.workloads, result.roles())
    summary_json = []
    for sm in summaries:
        entry = sm.to_json(ours_of(summaries, sm.workload))
        entry["ratios"] = baseline_ratios(sm, result.baselines)
        summary_json.append(entry)
    s = options.settings
    return {
        "schema_version": SCHEMA_VERSION,
        "started_at": result.started_at,
        "seconds": result.seconds,
        "units": {
            "mb_per_s": "10^6 payload bytes per second",
            "seconds": "wall clock",
            "vs_ours": "ratio of medians, > 1: ours better (more per second, or less "
                       "latency/memory); verdict 'even' when the min-max ranges overlap",
            "figures": "median, min and max over the runs",
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
            "repeats": options.repeats,
            "warmup_s": s.warmup_s,
            "measure_s": s.measure_s,
            "fill_records": {str(k): v for k, v in s.fill_records.items()},
            "linger_ms": s.linger_ms,
            "catchup_bytes": s.catchup_bytes,
            "e2e_rate": s.e2e_rate,
            "e2e_seconds": s.e2e_seconds,
            "e2e_fetch_wait_max_ms": s.e2e_fetch_wait_max_ms,
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
        "summaries": summary_json,
        "workloads": [w.to_json() for w in result.workloads],
        "checks": [c.to_json() for c in result.checks],
        "notes": result.notes,
    }


def write_json(path: Path, data: dict[str, object]) -> None:
    """Writes atomically, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    tmp.replace(path)
