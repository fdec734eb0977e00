"""How long a consumer group takes to recover after one member dies (kill -9).

Three kafka-python consumer processes share a 6-partition topic. One is killed with
SIGKILL; the clock runs until the group is Stable again with the two survivors owning
all six partitions, read through the admin API as any operator would see it. The
session timeout is the floor: the coordinator can only notice a silent member after
it, so the figure is printed next to it.

    python -m benchmarks.group_recovery [--rounds 3] [--session-timeout-ms 3000]
        [--protocols classic,consumer]

``--protocols consumer`` runs the members as confluent-kafka consumers with
``group.protocol=consumer`` (KIP-848; the session timeout is then the broker's
``group.consumer.session.timeout.ms``); with both, each round measures both, in
alternating order, on the same server.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kafka.admin import KafkaAdminClient, NewTopic

from commonlib.childproc import ChildProcess

from .progress import Progress
from .targets import LogserverTarget

log = logging.getLogger(__name__)

PARTITIONS = 6
MEMBERS = 3
SETTLE_TIMEOUT_S = 60.0
POLL_INTERVAL_S = 0.05

# One group member: subscribes, polls until killed, commits nothing it does not need to.
MEMBER_SCRIPT = """
import sys
from kafka import KafkaConsumer
bootstrap, topic, group, session_ms, client_id = sys.argv[1:6]
consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id=client_id,
                         session_timeout_ms=int(session_ms),
                         heartbeat_interval_ms=max(100, int(session_ms) // 6),
                         enable_auto_commit=False)
while True:
    consumer.poll(timeout_ms=200)
"""

# The same member with the KIP-848 protocol (the session timeout is the broker's).
CONSUMER_PROTOCOL_MEMBER_SCRIPT = """
import sys
from confluent_kafka import Consumer
bootstrap, topic, group, session_ms, client_id = sys.argv[1:6]
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": client_id,
                     "group.protocol": "consumer", "enable.auto.commit": False})
consumer.subscribe([topic])
while True:
    consumer.poll(0.2)
"""


def _owners(admin: KafkaAdminClient, group: str, topic: str) -> tuple[str, dict[str, int]] | None:
    """(group state, member id -> partitions owned) from DescribeGroups."""
    described = admin.describe_groups([group]).get(group)
    if described is None:
        return None
    owned = {}
    for member in described["members"]:
        assignment = member.get("member_assignment") or {}
        count = sum(len(a["partitions"]) for a in assignment.get("assigned_partitions", [])
                    if a["topic"] == topic)
        owned[member["member_id"]] = count
    return described["group_state"], owned


def _wait_until(admin: KafkaAdminClient, group: str, topic: str, members: int,
                deadline: float) -> float:
    """Blocks until the group is Stable with ``members`` members owning every partition."""
    while time.monotonic() < deadline:
        found = _owners(admin, group, topic)
        if found is not None:
            state, owned = found
            if state == "Stable" and len(owned) == members and sum(owned.values()) == PARTITIONS:
                return time.monotonic()
        time.sleep(POLL_INTERVAL_S)
    raise TimeoutError(f"group {group} did not settle with {members} members in time")


def _start_member(bootstrap: str, topic: str, group: str, session_ms: int,
                  index: int, protocol: str = "classic") -> ChildProcess:
    script = CONSUMER_PROTOCOL_MEMBER_SCRIPT if protocol == "consumer" else MEMBER_SCRIPT
    return ChildProcess(argv=[sys.executable, "-c", script, bootstrap, topic, group,
                              str(session_ms), f"member-{index}"],
                        name=f"member-{index}", log_path=Path(os.devnull)).spawn()


def measure_round(bootstrap: str, admin: KafkaAdminClient, round_no: int, session_ms: int,
                  protocol: str = "classic") -> float:
    topic, group = f"recovery-{protocol}-{round_no}", f"recovery-group-{protocol}-{round_no}"
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    members = [_start_member(bootstrap, topic, group, session_ms, i, protocol)
               for i in range(MEMBERS)]
    try:
        _wait_until(admin, group, topic, MEMBERS, time.monotonic() + SETTLE_TIMEOUT_S)
        killed_at = time.monotonic()
        members[0].kill9()
        recovered_at = _wait_until(admin, group, topic, MEMBERS - 1, killed_at + SETTLE_TIMEOUT_S)
        return recovered_at - killed_at
    finally:
        for member in members:
            member.kill9()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.group_recovery",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="kill-and-recover rounds (default 3)")
    parser.add_argument("--session-timeout-ms", type=int, default=3000,
                        help="consumers' session timeout (default 3000)")
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/group_recovery.json"),
                        help="result file (JSON)")
    parser.add_argument("--protocols", default="classic",
                        help="classic, consumer (KIP-848) or both: classic,consumer")
    args = parser.parse_args(argv)
    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    if not protocols or any(p not in ("classic", "consumer") for p in protocols):
        parser.error("--protocols takes classic and/or consumer")
    session_ms = args.session_timeout_ms
    logging.basicConfig(level=logging.WARNING)
    progress = Progress()
    with tempfile.TemporaryDirectory(prefix="group-recovery-") as workdir:
        target = LogserverTarget(Path(workdir), [
            "--group.initial.rebalance.delay.ms", "0", "--group.min.session.timeout.ms", "100",
            "--group.consumer.session.timeout.ms", str(session_ms),
            "--group.consumer.heartbeat.interval.ms", str(max(100, session_ms // 6))])
        with target:
            assert target.bootstrap is not None
            admin = KafkaAdminClient(bootstrap_servers=target.bootstrap)
            try:
                progress.start("group recovery after kill -9", args.rounds, "rounds")
                by_protocol: dict[str, list[float]] = {p: [] for p in protocols}
                for round_no in range(args.rounds):
                    order = protocols if round_no % 2 == 0 else list(reversed(protocols))
                    for protocol in order:
                        by_protocol[protocol].append(measure_round(
                            target.bootstrap, admin, round_no, session_ms, protocol))
                    progress.update(round_no + 1)
                progress.finish(f"{args.rounds} rounds")
            finally:
                admin.close()
    times = by_protocol[protocols[0]]
    result = {
        "workload": "group recovery after a member's kill -9",
        "session_timeout_ms": args.session_timeout_ms,
        "members": MEMBERS, "partitions": PARTITIONS,
        "protocol": protocols[0],
        "recovery_s": times,
        "median_s": statistics.median(times), "min_s": min(times), "max_s": max(times),
        "by_protocol": {p: {"recovery_s": t, "median_s": statistics.median(t),
                            "min_s": min(t), "max_s": max(t)} for p, t in by_protocol.items()},
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"group recovery after kill -9 of 1 of {MEMBERS} members ({PARTITIONS} partitions), "
          f"session timeout {args.session_timeout_ms} ms:")
    for protocol, times in by_protocol.items():
        median = statistics.median(times)
        print(f"  {protocol:>8}: median {median:.2f} s [{min(times):.2f}-{max(times):.2f}] "
              f"over {len(times)} rounds "
              f"({median * 1000 / args.session_timeout_ms:.2f}x the session timeout)")
    if len(by_protocol) == 2:
        classic, consumer = (statistics.median(by_protocol[p]) for p in ("classic", "consumer"))
        print(f"  consumer/classic recovery time: {consumer / classic:.2f}x")
    print(f"  result file: {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
