"""One PNG per workload: every target's median side by side, its min-max as an error bar.

Baselines are drawn as reference lines. matplotlib is optional (the ``bench`` extra):
without it the run still writes its table and JSON, and says why there are no plots.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from .runner import RunResult
from .summary import Summary, summarize
from .workloads import WORKLOADS

log = logging.getLogger(__name__)

_BASELINES_OF = {w.name: w.baselines for w in WORKLOADS}
_COLOURS = {"ours": "#1f77b4", "peer": "#999999"}


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def write_plots(result: RunResult, directory: Path) -> list[Path]:
    """Writes ``<workload>.png`` for every workload measured; returns the paths."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("no plots: matplotlib is not installed (pip install -e '.[bench]')")
        return []
    directory.mkdir(parents=True, exist_ok=True)
    summaries = summarize(result.workloads, result.roles())
    paths: list[Path] = []
    for name in dict.fromkeys(s.workload for s in summaries):
        rows = [s for s in summaries if s.workload == name]
        rows.sort(key=lambda s: s.role != "ours")
        fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
        try:
            if rows[0].kind in ("latency", "connections"):
                _latency(ax, rows)
            elif rows[0].kind == "mqtt-fanout":
                _bars(ax, rows, "all_p50_ms", "time to last device, median notice (ms)")
            else:
                _throughput(ax, rows, result)
            runs = max(len(s.runs) for s in rows)
            ax.set_title(f"{name} (median of {runs} runs, bars: min-max)", fontsize=10)
            ax.grid(axis="y", alpha=0.3)
            fig.tight_layout()
            path = directory / f"{_slug(name)}.png"
            fig.savefig(path)
            paths.append(path)
        finally:
            plt.close(fig)
    return paths


def _bars(ax, rows: list[Summary], metric: str, label: str) -> float:  # type: ignore[no-untyped-def]
    spreads = [s.spread(metric) for s in rows]
    values = [sp.median if sp else 0.0 for sp in spreads]
    below = [sp.median - sp.low if sp else 0.0 for sp in spreads]
    above = [sp.high - sp.median if sp else 0.0 for sp in spreads]
    colours = [_COLOURS.get(s.role, "#999999") for s in rows]
    bars = ax.bar([s.target for s in rows], values, color=colours, yerr=[below, above],
                  capsize=4, ecolor="#333333")
    for bar, v in zip(bars, values, strict=True):
        ax.annotate(f"{v:,.1f}" if v < 100 else f"{v:,.0f}", (bar.get_x() + bar.get_width() / 2, v),
                    ha="left", va="bottom", fontsize=8, xytext=(3, 0), textcoords="offset points")
    ax.set_ylabel(label)
    return max((sp.high for sp in spreads if sp), default=0.0)


def _throughput(ax, rows: list[Summary], result: RunResult) -> None:  # type: ignore[no-untyped-def]
    if rows[0].primary == "mb_per_s":
        top = _bars(ax, rows, "mb_per_s", "MB/s (10^6 payload bytes/s)")
        for b in result.baselines:
            if b.name in _BASELINES_OF.get(rows[0].workload, ()):
                ax.axhline(b.mb_per_s, linestyle="--", linewidth=1, color="#d62728"
                           if b.name == "loopback-tcp" else "#2ca02c")
                ax.annotate(f"{b.name} {b.mb_per_s:,.0f}", (0.01, b.mb_per_s), fontsize=7,
                            xycoords=("axes fraction", "data"), va="bottom")
                top = max(top, b.mb_per_s)
        ax.set_ylim(0, top * 1.15)
    else:
        label = "messages/s" if rows[0].kind == "mqtt-publish" else "records/s"
        _bars(ax, rows, "records_per_s", label)


def _latency(ax, rows: list[Summary]) -> None:  # type: ignore[no-untyped-def]
    keys = ["p50_ms", "p99_ms", "p999_ms"] if rows[0].kind == "latency" else [
        "p50_ms_without", "p99_ms_without", "p50_ms", "p99_ms"]
    width = 0.8 / len(keys)
    for i, key in enumerate(keys):
        xs = [j + i * width for j in range(len(rows))]
        spreads = [s.spread(key) for s in rows]
        values = [sp.median if sp else 0.0 for sp in spreads]
        err = [[sp.median - sp.low if sp else 0.0 for sp in spreads],
               [sp.high - sp.median if sp else 0.0 for sp in spreads]]
        ax.bar(xs, values, width=width, yerr=err, capsize=3,
               label=key.replace("_ms", "").replace("_without", " alone"))
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(rows))], [s.target for s in rows])
    ax.set_ylabel("ms")
    if rows[0].kind == "latency":
        ax.set_yscale("log")
    ax.legend(fontsize=8)
