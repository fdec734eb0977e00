"""``python -m benchmarks.markdown [RESULT.json]``: the README's performance tables.

Prints Markdown (baselines, one row per workload with each peer's figure and the ratio,
the targets with PASS/FAIL) from a result file, so the README shows exactly what a run
measured instead of hand-copied numbers.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .report import SHORT
from .workloads import WORKLOADS

DEFAULT = Path(__file__).resolve().parent / "results" / "latest.json"
_BASELINES_OF = {w.name: w.baselines for w in WORKLOADS}


def _primary(w: dict[str, Any]) -> tuple[float | None, str]:
    """The compared figure of a workload result and how to print it."""
    m = w.get("metrics", {})
    kind = w["kind"]
    if kind in ("latency", "connections"):
        return m.get("p99_ms"), "{:,.2f} ms p99"
    if kind == "mqtt-fanout":
        return m.get("all_p50_ms"), "{:,.0f} ms"
    if kind == "mqtt-publish":
        return w["records_per_s"], "{:,.0f} msg/s"
    if w.get("primary") == "mb_per_s":
        return w["mb_per_s"], "{:,.0f} MB/s"
    return w["records_per_s"], "{:,.0f} rec/s"


def _extra(w: dict[str, Any]) -> str:
    m = w.get("metrics", {})
    parts = []
    if w["kind"] in ("produce", "fetch", "catchup", "tail", "partitions") and w.get("primary") != "mb_per_s":
        parts.append(f"{w['mb_per_s']:,.0f} MB/s")
    if w["kind"] == "latency":
        parts.append(f"p50 {m.get('p50_ms', 0):.2f}, p999 {m.get('p999_ms', 0):.2f} ms")
    if w["kind"] == "connections" and "kib_per_connection" in m:
        parts.append(f"{m['kib_per_connection']:,.0f} KiB/conn")
    if w["kind"] == "mqtt-fanout":
        parts.append(f"max {m.get('all_max_ms', 0):,.0f} ms, RSS {m.get('rss_mb', 0):,.0f} MB")
    if "server_cpu_share" in m:
        parts.append(f"CPU {m['server_cpu_share']:.0%}")
    return ", ".join(parts)


def render(data: dict[str, Any]) -> str:
    """The Markdown for one result file."""
    roles = {t.get("name"): t.get("role") for t in data["targets"]}
    peers = [t["name"] for t in data["targets"] if t.get("role") == "peer" and "error" not in t]
    out = [f"Run of {data['started_at']} ({data['seconds']:.0f} s, {data['host']['cpus']} cores, "
           f"Python {data['host']['python']}, librdkafka {data['host']['librdkafka']}).", ""]
    out += ["| baseline | MB/s | how |", "| --- | ---: | --- |"]
    for b in data["baselines"]:
        out.append(f"| {b['name']} | {b['mb_per_s']:,.0f} | {b['detail']} |")
    out.append("")
    by: dict[str, dict[str, dict[str, Any]]] = {}
    for w in data["workloads"]:
        by.setdefault(w["workload"], {})[w["target"]] = w
    out += ["| workload | ours | " + " | ".join(f"{p} (ours ×)" for p in peers) + " | ours vs baselines |",
            "| --- | ---: | " + " | ".join("---:" for _ in peers) + " | --- |"]
    for name, rows in by.items():
        ours = next((w for t, w in rows.items() if roles.get(t) == "ours"), None)
        if ours is None:
            continue
        value, fmt = _primary(ours)
        cell = (fmt.format(value) if value is not None else "-") + (f" ({_extra(ours)})" if _extra(ours) else "")
        cells = []
        for p in peers:
            w = rows.get(p)
            if w is None:
                cells.append("")
                continue
            pv, pfmt = _primary(w)
            ratio = w.get("ours_vs_peer")
            cells.append((pfmt.format(pv) if pv is not None else "-")
                         + (f" (**{ratio:.2f}×**)" if ratio is not None else ""))
        wanted = _BASELINES_OF.get(name, ())
        ratios = ", ".join(f"{v:.2f} {SHORT.get(k, k)}" for k, v in ours.get("ratios", {}).items()
                           if k in wanted)
        out.append(f"| {name} | {cell} | " + " | ".join(cells) + f" | {ratios} |")
    out += ["", "ours × = how many times better logserver (MQTT: the bridge) is than that peer "
            "(> 1: ours better; for latency and memory, lower is better). CPU = the server's "
            "share of one core during the workload.", ""]
    out += ["| target | verdict | measured | bar |", "| --- | --- | ---: | ---: |"]
    for c in data.get("checks", []):
        value = "-" if c["value"] is None else f"{c['value']:,.2f} {c['unit']}"
        bar = "-" if c["threshold"] is None else f"{c['threshold']:,.2f} {c['unit']}"
        out.append(f"| {c['name']} | **{c['verdict']}** | {value} | {bar} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Prints the tables for the given result file (default: the latest run)."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.markdown", description=__doc__)
    p.add_argument("result", nargs="?", type=Path, default=DEFAULT)
    args = p.parse_args(argv)
    sys.stdout.write(render(json.loads(args.result.read_text())) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
