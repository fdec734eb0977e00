"""``python -m benchmarks``: the whole suite, logserver against baselines and peers."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path
from types import FrameType

from .mqtt_bench import MQTT_PEERS, MqttSettings
from .peers import CACHE_ENV, OLD_CACHE_ENV
from .plots import write_plots
from .progress import Progress, ProgressAwareHandler
from .report import format_table, to_json, write_json
from .runner import RunOptions, run
from .targets import PEERS, check_loopback
from .workloads import QUICK, WORKLOADS, Settings, select

log = logging.getLogger(__name__)

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_OUTPUT = RESULTS / "latest.json"
#: Runs per workload and server; fewer than 3 and every comparison is "even".
DEFAULT_REPEATS = 3
DEFAULT_MEASURE_S = 5.0
DEFAULT_WARMUP_S = 1.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; the defaults give the full suite in about 10 minutes."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=(
            "The benchmark suite of issue 7: produce/consume throughput, catch-up and tailing "
            "reads, end-to-end latency, 1,000 partitions and 1,000 idle connections through "
            "confluent-kafka; MQTT QoS 1 publish and 10,000-device fan-out; raw loopback, "
            "sendfile and file-append baselines; all in one run, against logserver (started "
            "from this work tree on 127.0.0.1) and peer servers (installed on first use "
            "into ~/.cache/logserver-benchmarks), printed as ratios, judged against the "
            "issue's targets, written as JSON and one PNG per workload."
        ),
        epilog=(
            "Every workload runs --repeats times on every server, each run on a fresh server: "
            "a warm-up, then a measured window of --seconds; servers back to back in "
            "alternating order. Each figure is the median [min-max] of the runs; a ratio "
            "whose two ranges overlap is printed as 'even'. Results: a table on stdout, "
            "progress and logs on stderr, JSON (--output) and PNGs next to it."
        ),
    )
    p.add_argument("--quick", action="store_true",
                   help="fewer workloads, runs just as long: " + ", ".join(QUICK)
                   + " and mqtt-publish-qos1; peers tansu and mosquitto only")
    p.add_argument("--suite", action="store_true",
                   help="the full suite (the default; kept for scripts that say so)")
    p.add_argument("--bootstrap", metavar="HOST:PORT",
                   help="benchmark an already-running server instead of starting one "
                   "(loopback only; no memory figures, no MQTT bridge)")
    p.add_argument("--peers", metavar="NAME[,NAME]",
                   help=f"Kafka peers (default: all: {','.join(PEERS)}; '' for none)")
    p.add_argument("--mqtt-peers", metavar="NAME[,NAME]",
                   help=f"MQTT peers (default: all: {','.join(MQTT_PEERS)}; '' for none)")
    p.add_argument("--no-mqtt", action="store_true", help="skip the MQTT workloads")
    p.add_argument("--workloads", default="", metavar="PATTERN[,PATTERN]",
                   help="only Kafka workloads whose name contains a pattern; known: "
                   + ", ".join(w.name for w in WORKLOADS))
    p.add_argument("--repeats", type=int, default=DEFAULT_REPEATS, metavar="N",
                   help="runs per workload and server (default %(default)s; under 3 every "
                   "comparison is 'even')")
    p.add_argument("--seconds", type=float, default=DEFAULT_MEASURE_S, metavar="SECONDS",
                   help="measured window of each run (default %(default)g)")
    p.add_argument("--warmup", type=float, default=DEFAULT_WARMUP_S, metavar="SECONDS",
                   help="warm-up before each window, not counted (default %(default)g)")
    p.add_argument("--catchup-bytes", type=int, metavar="BYTES",
                   help="size of the log the catch-up workloads read (default 1 GiB)")
    p.add_argument("--e2e-seconds", type=float, metavar="SECONDS",
                   help="measured seconds of the latency workload (default 10)")
    p.add_argument("--fanout", type=int, metavar="N", help="MQTT fan-out devices (default 10,000)")
    p.add_argument("--linger-ms", type=int, default=5,
                   help="producer linger.ms of the throughput workloads (default %(default)s)")
    p.add_argument("--baseline-seconds", type=float, metavar="SECONDS",
                   help="duration of each raw baseline run (default: --seconds)")
    p.add_argument("--baseline-repeats", type=int, metavar="N",
                   help="runs per raw baseline (default: --repeats; 0: no baselines)")
    p.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                   help="extra argument for the logserver the benchmark starts (repeatable), "
                   "e.g. --server-arg=--log.flush.interval.messages=1")
    p.add_argument("--output", type=Path, default=DEFAULT_OUTPUT,
                   help="JSON result file; PNGs go to its directory (default "
                   "benchmarks/results/latest.json)")
    p.add_argument("--no-plots", action="store_true", help="no PNGs")
    p.add_argument("--workdir", type=Path,
                   help="where the run's temporary directory goes (server data, baseline "
                   "files); default: the system temp dir. Put it on the disk you want measured.")
    p.add_argument("--keep-workdir", action="store_true", help="do not delete the temporary directory")
    p.add_argument("--no-progress", action="store_true", help="no progress display on stderr")
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="more logging (-vv: librdkafka too)")
    args = p.parse_args(argv)
    if os.environ.get(OLD_CACHE_ENV):
        p.error(f"{OLD_CACHE_ENV} is set: it was renamed {CACHE_ENV} (logserver takes "
                f"LOGSERVER_* variables for settings and warns about unknown ones); unset it "
                f"and use {CACHE_ENV} instead")

    def names(value: str | None, default: list[str], known: object, what: str) -> list[str]:
        if value is None:
            return default
        got = [x.strip() for x in value.split(",") if x.strip()]
        unknown = [x for x in got if x not in known]  # type: ignore[operator]
        if unknown:
            p.error(f"{what}: unknown {', '.join(unknown)}; known: {', '.join(known)}")  # type: ignore[arg-type]
        return got

    args.peers = names(args.peers, list(PEERS) if not args.quick else ["tansu"], PEERS, "--peers")
    args.mqtt_peers = names(args.mqtt_peers, list(MQTT_PEERS) if not args.quick else ["mosquitto"],
                            MQTT_PEERS, "--mqtt-peers")
    patterns = [x.strip() for x in args.workloads.split(",") if x.strip()]
    args.workloads = select(patterns or (list(QUICK) if args.quick else []))
    if not args.workloads and args.no_mqtt:
        p.error("--workloads matched nothing and --no-mqtt leaves nothing to run")
    for flag in ("catchup_bytes", "fanout", "repeats", "seconds"):
        value = getattr(args, flag)
        if value is not None and value <= 0:
            p.error(f"--{flag.replace('_', '-')} must be positive")
    if args.bootstrap:
        try:
            check_loopback(args.bootstrap)
        except ValueError as exc:
            p.error(f"--bootstrap: {exc}")
    if args.bootstrap and args.server_arg:
        p.error("--server-arg applies only to the server the benchmark starts, not --bootstrap")
    return args


def _terminate_as_interrupt(signum: int, frame: FrameType | None) -> None:
    # SIGTERM takes the same clean-up path as Ctrl-C: stop the servers, remove files.
    raise KeyboardInterrupt


def options_from(args: argparse.Namespace) -> RunOptions:
    """The run's options: the defaults, then whatever the flags override."""
    if args.repeats < 3:
        log.warning("--repeats %d: fewer than 3 runs, every comparison will be 'even'",
                    args.repeats)
    if args.seconds < 5:
        log.warning("--seconds %g: runs shorter than 5 s are noisier than the suite promises",
                    args.seconds)
    settings = Settings(
        warmup_s=args.warmup,
        measure_s=args.seconds,
        linger_ms=args.linger_ms,
        catchup_bytes=args.catchup_bytes or (1 << 30),
        e2e_seconds=args.e2e_seconds or max(10.0, args.seconds),
    )
    mqtt = None
    if not args.no_mqtt:
        fanout = [] if args.quick and args.fanout is None else [args.fanout or 10_000]
        mqtt = MqttSettings(warmup_s=args.warmup, measure_s=args.seconds, fanout=fanout,
                            qos=[1] if args.quick else [1, 0])
    return RunOptions(
        settings=settings,
        workloads=args.workloads,
        peers=args.peers,
        mqtt=mqtt,
        mqtt_peers=args.mqtt_peers,
        bootstrap=args.bootstrap,
        server_args=args.server_arg,
        repeats=args.repeats,
        baseline_seconds=args.baseline_seconds or args.seconds,
        baseline_repeats=args.repeats if args.baseline_repeats is None else args.baseline_repeats,
        workdir_parent=args.workdir,
        keep_workdir=args.keep_workdir,
        quick=args.quick,
    )


def main(argv: list[str] | None = None) -> int:
    """Runs the suite; exit 0 if every workload on our servers completed."""
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

    options = options_from(args)
    try:
        result = run(options, progress)
    except KeyboardInterrupt:
        progress.clear()
        print("interrupted; servers stopped, temporary files removed", file=sys.stderr)
        return 130
    print(format_table(result, options))
    write_json(args.output, to_json(result, options))
    print(f"Results written to {args.output}")
    if not args.no_plots:
        plots = write_plots(result, args.output.parent)
        if plots:
            print(f"{len(plots)} plots written to {args.output.parent}/*.png")
    return 1 if result.ours_failed else 0


if __name__ == "__main__":
    sys.exit(main())
