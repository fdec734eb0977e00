"""``python -m benchmarks``: throughput of logserver against same-run baselines and peers."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path
from types import FrameType

from .progress import Progress, ProgressAwareHandler
from .report import format_table, to_json, write_json
from .runner import RunOptions, run
from .targets import PEERS, check_loopback
from .workloads import Settings

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results" / "latest.json"
DEFAULT_SIZES = [100, 1024]
#: Records per workload by record size (500 MB and 2 GiB of payload): a few seconds each
#: at the ~2 M records/s a Python client loop tops out at, so start-up costs fade out.
DEFAULT_RECORDS = {100: 5_000_000, 1024: 2_000_000}
QUICK_RECORDS = 200_000
DEFAULT_TIME_CAP = 20.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; every option has a default that gives a full run in ~3 minutes."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=(
            "Produce and fetch throughput of logserver with confluent-kafka (100 B and 1 KiB "
            "records), printed next to raw loopback-socket and file-append bandwidth measured "
            "in the same run, and optionally next to peer brokers. By default starts logserver "
            "from this work tree on a free 127.0.0.1 port with its data in a temporary "
            "directory, and stops it at the end."
        ),
        epilog=(
            "Each workload stops at its record count or its time cap, whichever comes first; "
            "a capped figure is marked '*'. Results: a table on stdout, progress and logs on "
            "stderr, and a JSON file (--output)."
        ),
    )
    p.add_argument(
        "--bootstrap",
        metavar="HOST:PORT",
        help="benchmark an already-running server instead of starting one (loopback only)",
    )
    p.add_argument(
        "--peers",
        default="",
        metavar="NAME[,NAME]",
        help=f"also benchmark these peer brokers, installed on first use; known: {', '.join(PEERS)}",
    )
    p.add_argument(
        "--records",
        type=int,
        metavar="N",
        help="records per workload for every record size (default: "
        + ", ".join(f"{v:,} of {k} B" for k, v in DEFAULT_RECORDS.items())
        + ")",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"a smoke run: {QUICK_RECORDS:,} records, 5 s time cap, one 0.5 s run per baseline",
    )
    p.add_argument(
        "--time-cap",
        type=float,
        metavar="SECONDS",
        help=f"time cap per workload (default {DEFAULT_TIME_CAP:g}, quick 5)",
    )
    p.add_argument(
        "--sizes",
        default=",".join(map(str, DEFAULT_SIZES)),
        metavar="BYTES[,BYTES]",
        help="record value sizes (default %(default)s)",
    )
    p.add_argument(
        "--partitions", type=int, default=1, help="partitions of each fresh topic (default 1)"
    )
    p.add_argument(
        "--acks", default="1", choices=["0", "1", "-1", "all"], help="producer acks (default 1)"
    )
    p.add_argument(
        "--linger-ms", type=int, default=5, help="producer linger.ms (default %(default)s)"
    )
    p.add_argument(
        "--baseline-seconds",
        type=float,
        metavar="SECONDS",
        help="duration of each raw baseline run (default 1.5, quick 0.5)",
    )
    p.add_argument(
        "--baseline-repeats",
        type=int,
        metavar="N",
        help="runs per raw baseline, pooled (default 2, quick 1)",
    )
    p.add_argument(
        "--server-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra argument for the logserver the benchmark starts (repeatable), "
        "e.g. --server-arg=--log.flush.interval.messages=1",
    )
    p.add_argument(
        "--output",
        type=Path,
        default=DEFAULT_OUTPUT,
        help="JSON result file (default benchmarks/results/latest.json)",
    )
    p.add_argument(
        "--workdir",
        type=Path,
        help="where the run's temporary directory goes (server data, baseline files); "
        "default: the system temp dir. Put it on the disk you want measured.",
    )
    p.add_argument(
        "--keep-workdir", action="store_true", help="do not delete the temporary directory"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress display on stderr")
    p.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging (-vv: librdkafka too)"
    )
    args = p.parse_args(argv)

    try:
        args.sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    except ValueError:
        p.error(f"--sizes: not a list of integers: {args.sizes!r}")
    if not args.sizes or any(s <= 0 for s in args.sizes):
        p.error("--sizes: record sizes must be positive")
    args.peers = [x.strip() for x in args.peers.split(",") if x.strip()]
    unknown = [x for x in args.peers if x not in PEERS]
    if unknown:
        p.error(f"--peers: unknown peer(s) {', '.join(unknown)}; known: {', '.join(PEERS)}")
    if args.records is not None and args.records <= 0:
        p.error("--records must be positive")
    if args.partitions <= 0:
        p.error("--partitions must be positive")
    if args.bootstrap:
        try:
            check_loopback(args.bootstrap)
        except ValueError as exc:
            p.error(f"--bootstrap: {exc}")
    if args.bootstrap and args.server_arg:
        p.error("--server-arg applies only to the server the benchmark starts, not --bootstrap")
    return args


def _records_per_size(args: argparse.Namespace) -> dict[int, int]:
    if args.records is not None:
        return {size: args.records for size in args.sizes}
    if args.quick:
        return {size: QUICK_RECORDS for size in args.sizes}
    # Unlisted sizes get about as many bytes as the 1 KiB default.
    return {size: DEFAULT_RECORDS.get(size, max(1, (2 << 30) // size)) for size in args.sizes}


def _terminate_as_interrupt(signum: int, frame: FrameType | None) -> None:
    # SIGTERM takes the same clean-up path as Ctrl-C: stop the servers, remove files.
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmark; exit 0 if every workload on our server completed."""
    args = parse_args(argv)
    progress = Progress(enabled=not args.no_progress)
    handler = ProgressAwareHandler(progress)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if args.verbose else logging.INFO)
    if args.verbose < 2:
        logging.getLogger("benchmarks.librdkafka").setLevel(logging.ERROR)
    signal.signal(signal.SIGTERM, _terminate_as_interrupt)

    settings = Settings(
        records=_records_per_size(args),
        time_cap=args.time_cap
        if args.time_cap is not None
        else (5.0 if args.quick else DEFAULT_TIME_CAP),
        partitions=args.partitions,
        acks=args.acks,
        linger_ms=args.linger_ms,
    )
    options = RunOptions(
        settings=settings,
        sizes=args.sizes,
        peers=args.peers,
        bootstrap=args.bootstrap,
        server_args=args.server_arg,
        baseline_seconds=args.baseline_seconds
        if args.baseline_seconds is not None
        else (0.5 if args.quick else 1.5),
        baseline_repeats=args.baseline_repeats
        if args.baseline_repeats is not None
        else (1 if args.quick else 2),
        workdir_parent=args.workdir,
        keep_workdir=args.keep_workdir,
    )
    try:
        result = run(options, progress)
    except KeyboardInterrupt:
        progress.clear()
        print("interrupted; servers stopped, temporary files removed", file=sys.stderr)
        return 130
    print(format_table(result, options))
    write_json(args.output, to_json(result, options))
    print(f"Results written to {args.output}")
    return 1 if result.ours_failed else 0


if __name__ == "__main__":
    sys.exit(main())
