"""Long fault runs: ``python -m benchmarks.fault_run [--duration 300] [--seed N]``.

The run of tests/cluster/test_faultrun.py (tests/helpers/faultrun) for minutes instead of
one fault of each kind:
three brokers and etcd, each in a network namespace (root; ``--no-netns``: all on
127.0.0.1, without network partitions), under idempotent acks=all producers, a
transactional producer sending offsets to a group coordinated by another broker and a
group committing continuously. Faults drawn from the seed one after the other (each
kind once first), the cluster whole again after each, until ``--duration`` seconds or
``--faults`` faults; then the checker. Prints every fault, the counts per fault and the
checker's verdict; exit status 1 if any property was broken.
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers.faultrun.nemesis import Done  # noqa: E402
from helpers.faultrun.run import run  # noqa: E402
from helpers.faultrun.schedule import KINDS  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fault_run", description=__doc__)
    parser.add_argument("--seed", type=int, help="default: a random one (printed)")
    parser.add_argument("--duration", type=float, default=300.0,
                        help="seconds of faults (the run then stops by itself)")
    parser.add_argument("--faults", type=int, help="at most this many faults")
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help=f"comma-separated fault kinds (default: all of {','.join(KINDS)})")
    parser.add_argument("--no-netns", action="store_true",
                        help="brokers on 127.0.0.1 (no root needed; no network partitions)")
    parser.add_argument("--workdir", type=Path, help="keep data and logs here")
    parser.add_argument("--history", type=Path, help="write the run's history here (JSON)")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    kinds = [k for k in args.kinds.split(",") if k and not (args.no_netns and k == "partition")]
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    # kafka-python warns of every retried produce: the errors it retries are expected here
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    print(f"fault run: seed {seed}, {args.duration:.0f} s, kinds {','.join(kinds)}", flush=True)

    def show(done: Done) -> None:
        print(f"  {done.step} on {done.target}: whole again {done.recovery_s:.1f} s after",
              flush=True)

    with tempfile.TemporaryDirectory(prefix="fault-run-") as tmp:
        root = args.workdir or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        report = run(root, seed, faults=args.faults, duration_s=args.duration, kinds=kinds,
                     netns=not args.no_netns, on_step=show)
    if args.history is not None:
        report.history.save(args.history)
    print(report.table())
    print("client errors (retried or counted, never a property):")
    for name, errors in report.client_errors.items():
        print(f"  {name}: {dict(errors.most_common(6)) or 'none'}")
    if not report.ok and args.history is None:
        print("run again with --history FILE (same --seed) to keep the history for reading")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
