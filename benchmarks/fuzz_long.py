"""Long coverage-guided fuzzing run: ``python -m benchmarks.fuzz_long --minutes 3``.

Runs each harness of tests/helpers/fuzz/ (the Kafka request decoder, the record-batch validator,
the MQTT decoder) for ``--minutes`` under libFuzzer. A crash stops libFuzzer; the run then
saves the input, counts it (distinct crashes by their exception line) and resumes from the
corpus built so far until the time is up. Prints, per harness: executions, libFuzzer's
coverage (``cov:`` instrumented edges, ``ft:`` features), corpus size and crashes found,
then one summary table (figures for docs/performance.md).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from helpers.fuzz import runner  # noqa: E402  (tests/ on the path first)

_EXCEPTION = re.compile(r"^(\w+(?:Error|Exception)\b.*)$", re.M)


def _signature(output: str) -> str:
    found = _EXCEPTION.findall(output)
    if found:
        return found[0][:200]
    for marker in ("libFuzzer: timeout", "libFuzzer: out-of-memory", "libFuzzer: deadly signal"):
        if marker in output:
            return marker
    return "unknown crash"


def fuzz_one(harness: str, seconds: float, workdir: Path, crashes_dir: Path) -> dict[str, object]:
    deadline = time.monotonic() + seconds
    executions = 0
    restarts = 0
    crashes: dict[str, bytes] = {}
    last: runner.FuzzRun | None = None
    while (left := int(deadline - time.monotonic())) > 0:
        last = runner.run(harness, workdir, seconds=left)
        executions += last.executions
        if not last.crashed:
            break
        restarts += 1
        signature = _signature(last.output)
        print(f"  {harness}: crash #{restarts}: {signature}", flush=True)
        if signature not in crashes and last.crash is not None:
            crashes[signature] = last.crash
            path = crashes_dir / f"{harness}-{len(crashes)}"
            path.write_bytes(last.crash)
            print(f"    input saved to {path}: {last.crash[:120]!r}", flush=True)
        if last.crash_path is not None:
            last.crash_path.unlink(missing_ok=True)
    assert last is not None
    return {
        "harness": harness, "executions": executions, "cov": last.coverage,
        "ft": last.features, "corpus": last.corpus, "crashes": restarts,
        "distinct": len(crashes), "signatures": list(crashes),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=3.0, help="per harness")
    parser.add_argument("--harness", action="append", choices=runner.HARNESSES,
                        help="only these (repeatable); default all")
    parser.add_argument("--workdir", type=Path, help="keep corpora and crashes here")
    args = parser.parse_args(argv)
    harnesses = args.harness or list(runner.HARNESSES)
    with tempfile.TemporaryDirectory(prefix="fuzz-long-") as tmp:
        base = args.workdir or Path(tmp)
        crashes_dir = base / "crashes"
        crashes_dir.mkdir(parents=True, exist_ok=True)
        rows = []
        for harness in harnesses:
            print(f"fuzzing {harness} for {args.minutes} min ...", flush=True)
            started = time.monotonic()
            row = fuzz_one(harness, args.minutes * 60, base / harness, crashes_dir)
            row["seconds"] = round(time.monotonic() - started)
            rows.append(row)
            print(f"  {row}", flush=True)
        print("\n| harness | minutes | executions | exec/s | cov | ft | corpus | crashes (distinct) |")
        print("|---|---|---|---|---|---|---|---|")
        for r in rows:
            rate = int(r["executions"]) / max(int(r["seconds"]), 1)  # type: ignore[call-overload]
            print(f"| {r['harness']} | {args.minutes:g} | {r['executions']:,} | {rate:,.0f} | "
                  f"{r['cov']} | {r['ft']} | {r['corpus']} | {r['crashes']} ({r['distinct']}) |")
        return 1 if any(r["crashes"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
