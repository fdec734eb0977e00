"""Long run of the API fuzzer: ``python -m benchmarks.fuzz_api --examples 200000``.

tests/integration/test_reliability_fuzz.py throws malformed frames at every API and version of a real
server; the suite runs a fixed set of 2,000. This runs that test with ``--examples`` of
hypothesis's randomly chosen ones and prints its figures (frames, answered, closed, slow,
the valid client's slowest answer). Exit status: pytest's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fuzz_api", description=__doc__)
    parser.add_argument("--examples", type=int, default=200_000)
    args = parser.parse_args(argv)
    env = dict(os.environ, FUZZ_EXAMPLES=str(args.examples), FUZZ_RANDOMIZE="1")
    command = [sys.executable, "-m", "pytest", "-p", "no:xdist", "-s", "-q",
               "tests/integration/test_reliability_fuzz.py::test_fuzz_every_api_and_version"]
    return subprocess.run(command, cwd=ROOT, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
