"""One PNG per workload: every target's figure side by side, baselines as reference lines.

matplotlib is optional (the ``bench`` extra): without it the run still writes its table
and JSON, and says why there are no plots.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from .runner import RunResult
from .workloads import WORKLOADS, WorkloadResult

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
    roles = result.roles()
    paths: list[Path] = []
    names = list(dict.fromkeys(w.workload for w in result.workloads))
    for name in names:
        rows = [w for w in result.workloads if w.workload == name]
        fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
        try:
            if rows[0].kind in ("latency", "connections"):
                _latency(ax, rows, roles)
            elif rows[0].kind == "mqtt-fanout":
                _bars(ax, rows, roles, "all_p50_ms", "time to last device, median (ms)")
            else:
                _throughput(ax, rows, roles, result)
            ax.set_title(name, fontsize=11)
            ax.grid(axis="y", alpha=0.3)
            fig.tight_layout()
            path = directory / f"{_slug(name)}.png"
            fig.savefig(path)
            paths.append(path)
        finally:
            plt.close(fig)
    return paths


def _bars(ax, rows: list[WorkloadResult], roles: dict[str, str], metric: str,  # type: ignore[no-untyped-def]
          label: str) -> None:
    values = [r.value(metric) or 0.0 for r in rows]
    colours = [_COLOURS.get(roles.get(r.target, "peer"), "#999999") for r in rows]
    bars = ax.bar([r.target for r in rows], values, color=colours)
    for bar, v in zip(bars, values, strict=True):
        ax.annotate(f"{v:,.1f}" if v < 100 else f"{v:,.0f}", (bar.get_x() + bar.get_width() / 2, v),
                    ha="center", va="bottom", fontsize=8)
    ax.set_ylabel(label)


def _throughput(ax, rows: list[WorkloadResult], roles: dict[str, str],  # type: ignore[no-untyped-def]
                result: RunResult) -> None:
    if rows[0].primary == "mb_per_s":
        _bars(ax, rows, roles, "mb_per_s", "MB/s (10^6 payload bytes/s)")
        top = max(r.mb_per_s for r in rows)
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
        _bars(ax, rows, roles, "records_per_s", label)


def _latency(ax, rows: list[WorkloadResult], roles: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    keys = ["p50_ms", "p99_ms", "p999_ms"] if rows[0].kind == "latency" else [
        "p50_ms_without", "p99_ms_without", "p50_ms", "p99_ms"]
    width = 0.8 / len(keys)
    for i, key in enumerate(keys):
        xs = [j + i * width for j in range(len(rows))]
        values = [r.metrics.get(key, 0.0) for r in rows]
        ax.bar(xs, values, width=width, label=key.replace("_ms", "").replace("_without", " alone"))
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(rows))], [r.target for r in rows])
    ax.set_ylabel("ms")
    ax.legend(fontsize=8)
