"""Long crash runs: ``python -m benchmarks.crash_loop --cycles 1000 [--mode M] [--power-loss]
[--writer-thread]``.

The same harness as tests/integration/test_reliability_crash.py (kill -9 at random moments under an
idempotent acks=all producer, full check of the log after every cycle), for counts too
long for CI: the suite runs 3-8 cycles of each combination, this is their long form.
Prints the figures, among them how long before the kill the oldest lost record was
acknowledged (under fsync-interval: the interval plus one fsync on an idle machine; the
tests judge loss by the fsynced bytes, not by this clock). Exit status 1 if any cycle
broke the mode's guarantee.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers.faults import crashloop  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.crash_loop", description=__doc__)
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--mode", choices=list(crashloop.MODES), default="fsync-every-append")
    parser.add_argument("--power-loss", action="store_true",
                        help="also cut unsynced bytes after each kill (simulated power failure)")
    parser.add_argument("--writer-thread", action="store_true",
                        help="hand every append to the writer thread (log.writer.thread.min.bytes=0)")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--time-budget", type=float, help="stop after this many seconds")
    parser.add_argument("--workdir", type=Path, help="keep data and server log here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="crash-loop-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        report = crashloop.run(workdir, args.mode, args.cycles, power_loss=args.power_loss,
                               seed=args.seed, time_budget=args.time_budget,
                               extra_settings={"log.writer.thread.min.bytes": 0}
                               if args.writer_thread else None)
    for failure in report.failures:
        print("FAILURE:", failure)
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
