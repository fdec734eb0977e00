"""The network fuzzer's long run, measured: ``python -m benchmarks.fuzz_network``.

One logserver on 127.0.0.1. Sessions of ``--seconds`` alternate (A B, B A, ...,
``--repeats`` of each): the healthy kafka-python client producing and consuming a fresh
topic alone, and the same with tests/helpers/fuzz/netfuzz.py sending mutated real client requests
into that topic on ``--connections`` connections. Prints every session, then the healthy
client's produce throughput with and without the fuzzer (min / median / max, ratio), what
the fuzzer sent and what the broker answered, the server's peak RSS, and whether the
healthy client lost anything, the server stayed up, or its log holds a traceback.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from helpers.clienthelpers import create_topic  # noqa: E402  (tests/ on the path first)
from helpers.fuzz.netsession import Session, session  # noqa: E402
from helpers.serverproc import ServerProcess  # noqa: E402

from benchmarks.stats import Spread, compare, number  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30, help="per session")
    parser.add_argument("--repeats", type=int, default=3, help="sessions of each kind")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--consumer", choices=["confluent-kafka", "kafka-python"],
                        default="confluent-kafka", help="the healthy client's consumer")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    print(f"seed {seed}, healthy consumer {args.consumer}", flush=True)
    sessions: dict[bool, list[Session]] = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="fuzz-network-") as tmp:
        server = ServerProcess(Path(tmp) / "data")
        server.start()
        try:
            for i in range(args.repeats):
                for fuzz in ((False, True) if i % 2 == 0 else (True, False)):
                    topic = f"healthy-{i}-{'fuzzed' if fuzz else 'alone'}"
                    create_topic(server.bootstrap, topic, args.partitions)
                    assert server.pid is not None
                    result = session(server.pid, server.port, topic, args.partitions,
                                     args.seconds, fuzz=fuzz, connections=args.connections,
                                     seed=seed + i, consumer_library=args.consumer)
                    sessions[fuzz].append(result)
                    print(json.dumps({"session": topic, **result.to_json()}), flush=True)
            alive = server.running
        finally:
            server.stop()
        log = server.log_path.read_text(errors="replace")
    alone = Spread.of([s.healthy.produce_rate for s in sessions[False]])
    fuzzed = Spread.of([s.healthy.produce_rate for s in sessions[True]])
    comparison = compare(fuzzed, alone, higher_is_better=True)
    frames: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    accepted_invalid: Counter[str] = Counter()
    closed = 0
    for s in sessions[True]:
        if s.fuzzer:
            frames.update({"total": s.fuzzer["frames_total"]})
            for kind, count in s.fuzzer["frames"].items():
                frames[kind.split("/")[0]] += count
            errors.update(s.fuzzer["produce_errors"])
            accepted_invalid.update(s.fuzzer["accepted_invalid"])
            closed += s.fuzzer["closed_by_server"]
    print()
    print(f"healthy produce throughput (records/s, acks=all), {args.seconds:g} s sessions:")
    print(f"  alone:       median {number(alone.median)} (min {number(alone.low)}, "
          f"max {number(alone.high)}, {alone.runs} runs)")
    print(f"  with fuzzer: median {number(fuzzed.median)} (min {number(fuzzed.low)}, "
          f"max {number(fuzzed.high)}, {fuzzed.runs} runs)")
    if comparison is not None:
        print(f"  with / without: {comparison.text()}")
    print(f"fuzzer frames: {dict(frames)}; connections closed by the server: {closed}")
    print(f"produce answers to the fuzzer: {dict(errors)}")
    print(f"batches that must be refused but were acknowledged: {dict(accepted_invalid) or 0}")
    everything = sessions[False] + sessions[True]
    missing = sum(s.healthy.missing for s in everything)
    client_errors = [e for s in everything for e in s.healthy.errors]
    print(f"healthy records acknowledged: {sum(s.healthy.produced for s in everything):,}, "
          f"missing at the consumer: {missing}, client errors: {client_errors or 0}")
    print(f"server peak RSS: alone {max(s.peak_rss_mb for s in sessions[False]):.0f} MB, "
          f"with fuzzer {max(s.peak_rss_mb for s in sessions[True]):.0f} MB; "
          f"up at the end: {alive}; tracebacks in its log: {log.count('Traceback')}")
    _print_tracebacks(log)
    return 0 if alive and not missing and not client_errors and not accepted_invalid else 1


def _print_tracebacks(log: str) -> None:
    """Each distinct traceback of the server's log (by its last line), with what preceded it."""
    seen: set[str] = set()
    lines = log.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("Traceback"):
            continue
        end = i + 1
        while end < len(lines) and (lines[end].startswith((" ", "\t")) or not lines[end].strip()
                                    or lines[end].startswith(("During handling", "The above"))):
            end += 1
        last = lines[end] if end < len(lines) else ""
        if last in seen:
            continue
        seen.add(last)
        print("\n".join(["--- server traceback:", *lines[max(0, i - 2):end + 1]]))


if __name__ == "__main__":
    sys.exit(main())
