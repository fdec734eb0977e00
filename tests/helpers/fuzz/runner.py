"""Run one harness under libFuzzer in a subprocess and read what it prints.

A crash (an uncaught exception, a libFuzzer timeout or an RSS past the limit) ends the
run; the input libFuzzer saved is read back so a test failure can show it. Used by
tests/integration/test_fuzz_codecs.py (bounded) and benchmarks/fuzz_long.py (minutes).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TESTS = ROOT / "tests"
HARNESSES = ("kafka_requests", "record_batches", "mqtt_packets")

_STATUS = re.compile(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)", re.M)
_DONE = re.compile(r"^Done (\d+) runs in (\d+) second", re.M)
_EXECUTED = re.compile(r"stat::number_of_executed_units: (\d+)")
_ARTIFACT = re.compile(r"(?:Test unit|artifact) written to (\S+)")


@dataclass
class FuzzRun:
    harness: str
    returncode: int
    executions: int
    coverage: int  # libFuzzer's "cov:": instrumented edges reached
    features: int  # libFuzzer's "ft:"
    corpus: int
    crash_path: Path | None
    crash: bytes | None
    output: str

    @property
    def crashed(self) -> bool:
        return self.crash is not None or self.returncode != 0

    def report(self) -> str:
        lines = [f"{self.harness}: exit {self.returncode}, {self.executions} executions, "
                 f"cov {self.coverage}, ft {self.features}, corpus {self.corpus}"]
        if self.crash is not None:
            lines.append(f"crashing input ({len(self.crash)} bytes, {self.crash_path}): "
                         f"{self.crash!r}")
        tail = [line for line in self.output.splitlines()
                if not line.startswith('"') and "# Uses:" not in line]
        lines.append("\n".join(tail[-60:]))
        return "\n".join(lines)


def env() -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])])
    return out


def write_seeds(harness: str, corpus: Path) -> None:
    subprocess.run([sys.executable, "-m", f"helpers.fuzz.{harness}", "--seeds", str(corpus)],
                   cwd=TESTS, env=env(), check=True, capture_output=True, timeout=120)


def run(
    harness: str,
    workdir: Path,
    *,
    seconds: int = 0,
    runs: int = -1,
    rss_limit_mb: int = 512,
    input_timeout: int = 10,
    max_len: int = 8192,
    seed: int | None = None,
) -> FuzzRun:
    """Fuzz ``harness`` for at most ``seconds`` (0: no limit) and ``runs`` inputs (-1: no
    limit), corpus in ``workdir``; one of them must be given.

    The test suite budgets by ``runs`` with a fixed ``seed`` (the same inputs however
    loaded the machine); benchmarks/fuzz_long.py by time. A run budgeted by ``runs`` has
    no wall-clock limit here (the harness's start-up, instrumenting our packages and
    writing its seeds, took over 3 minutes on a machine at load 19): the test's own
    pytest-timeout is the hang guard. The corpus directory is kept, so calling again
    continues where the last run stopped.
    """
    assert seconds > 0 or runs > 0, "a fuzz run needs a budget: seconds or runs"
    corpus = workdir / "corpus"
    artifacts = workdir / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", f"helpers.fuzz.{harness}"]
    if not corpus.exists():
        corpus.mkdir(parents=True)
        command.append(f"--write-seeds={corpus}")
    command += [
        f"-max_total_time={seconds}", f"-runs={runs}", f"-rss_limit_mb={rss_limit_mb}",
        f"-timeout={input_timeout}", f"-max_len={max_len}", "-print_final_stats=1",
        f"-artifact_prefix={artifacts}/",
    ]
    if seed is not None:
        command.append(f"-seed={seed}")
    command.append(str(corpus))
    proc = subprocess.run(command, cwd=TESTS, env=env(), capture_output=True, text=True,
                          errors="replace", timeout=seconds + 600 if seconds else None)
    output = proc.stdout + proc.stderr
    statuses = _STATUS.findall(output)
    last = statuses[-1] if statuses else ("0", "0", "0", "0")
    executed = _EXECUTED.search(output)
    executions = int(executed.group(1)) if executed else int(last[0])
    crash_path = None
    crash = None
    found = _ARTIFACT.findall(output)
    if found:
        crash_path = Path(found[-1])
        crash = crash_path.read_bytes() if crash_path.exists() else None
    return FuzzRun(harness, proc.returncode, executions, int(last[1]), int(last[2]),
                   int(last[3]), crash_path, crash, output)
