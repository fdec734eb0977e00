"""``python -m benchmarks.markdown [RESULT.json]``: the manual's performance tables (docs/performance.md).

Prints Markdown (baselines, one row per workload with each peer's figure and how ours
compares, the targets with PASS/FAIL) from a result file, so docs/performance.md shows exactly
what a run measured instead of hand-copied numbers. Every figure is ``median
[min-max]`` over the runs; a comparison is a ratio of medians with its verdict.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .report import BASELINES_OF, SHORT, detail_text, figure_text
from .stats import Comparison, Spread

DEFAULT = Path(__file__).resolve().parent / "results" / "latest.json"


def _figures(entry: dict[str, Any]) -> dict[str, Spread]:
    return {k: Spread(v["median"], v["min"], v["max"], int(v["runs"]))
            for k, v in entry.get("figures", {}).items()}


def render(data: dict[str, Any]) -> str:
    """The Markdown for one result file."""
    st = data["settings"]
    out = [f"Run of {data['started_at']} ({data['seconds'] / 60:.0f} min, {data['host']['cpus']} "
           f"cores, Python {data['host']['python']}, librdkafka {data['host']['librdkafka']}): "
           f"every figure is the median [min-max] of {st['repeats']} runs, each on a fresh "
           f"server, {st['warmup_s']:g} s warm-up then a {st['measure_s']:g} s measured "
           "window, the servers back to back in alternating order.", ""]
    if data["baselines"]:
        out += ["| baseline | MB/s | how |", "| --- | ---: | --- |"]
    for b in data["baselines"]:
        out.append(f"| {b['name']} | {b['mb_per_s']:,.0f} [{b['low']:,.0f}-{b['high']:,.0f}] "
                   f"| {b['detail']} |")
    out.append("")
    by: dict[str, dict[str, dict[str, Any]]] = {}
    for e in data["summaries"]:
        by.setdefault(e["workload"], {})[e["target"]] = e
    out += ["| workload | server | figure | vs ours | detail | ours vs baselines |",
            "| --- | --- | ---: | --- | --- | --- |"]
    for name, rows in by.items():
        ordered = sorted(rows.values(), key=lambda e: (e["role"] != "ours", e["target"]))
        for e in ordered:
            f = _figures(e)
            vs = e.get("vs_ours")
            vs_text = ""
            if vs is not None:
                c = Comparison(vs["ratio"], vs["verdict"])
                vs_text = c.text() if c.verdict == "even" else f"**{c.text()}**"
            detail = detail_text(e["kind"], e["primary"], f)
            if e.get("failed_runs"):
                detail += f"; {e['failed_runs']} of {e['runs']} runs incomplete"
            wanted = BASELINES_OF.get(name, ())
            ratios = ", ".join(f"{v:.2f} {SHORT.get(k, k)}" for k, v in e.get("ratios", {}).items()
                               if k in wanted) if e["role"] == "ours" else ""
            first = name if e is ordered[0] else ""
            out.append(f"| {first} | {e['target']} | {figure_text(e['kind'], e['primary'], f)} "
                       f"| {vs_text} | {detail} | {ratios} |")
    out += ["", "vs ours = how ours (logserver; for MQTT the bridge) compares with that peer: "
            "the ratio of medians (> 1: ours better; for latency and memory lower is better), "
            "and **better**/**worse** only when the two min-max ranges do not overlap, else "
            "even. CPU = the server's share of one core over the measured window.", ""]
    notes = data.get("notes", [])
    if notes:
        out += ["", "Notes of the run:", ""] + [f"- {n}" for n in notes]
    return "\n".join(out)


def render_checks(files: list[dict[str, Any]]) -> str:
    """The issue's targets judged in any of the files (a target no file judged is left out)."""
    out = ["| target | verdict | measured (median) | bar | detail |",
           "| --- | --- | ---: | ---: | --- |"]
    for data in files:
        for c in data.get("checks", []):
            if c["verdict"] == "n/a":
                continue
            value = f"{c['value']:,.2f} {c['unit']}"
            bar = f"{c['threshold']:,.2f} {c['unit']}"
            out.append(f"| {c['name']} | **{c['verdict']}** | {value} | {bar} | {c['detail']} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Prints the tables for the given result files (default: the latest run)."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.markdown", description=__doc__)
    p.add_argument("results", nargs="*", type=Path, default=[DEFAULT])
    args = p.parse_args(argv)
    files = [json.loads(path.read_text()) for path in args.results]
    parts = [render(data) for data in files] + [render_checks(files)]
    sys.stdout.write("\n\n".join(parts) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
