"""``logserver group list|describe|reset-offsets|delete`` against a real server, with
real consumers in the group (kafka-python, and ``logserver consume --group``): the lag
shown is what was produced minus what was consumed, and reset offsets are where a real
consumer starts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from helpers.admin_cli import cli_env, logserver, ok, ok_json, one_error_line
from helpers.clienthelpers import KP_TIMEOUTS, create_topic, kp_end_offsets, kp_produce
from helpers.serverproc import REPO_ROOT

pytestmark = pytest.mark.timeout(180)


def _wait(condition, timeout: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


# kafka-python 3.0.12 (kafka/coordinator/base.py:480 ``while self.need_rejoin()``, and
# :490, which starts a new JoinGroup once the previous one is done) forgets a rejoin a
# poll() timed out on: if the rejoin was its own (the leader saw new partitions) and it
# completes between two polls, it never re-enables heartbeats nor takes the assignment,
# and the server drops it after session.timeout.ms; if the coordinator asked for it, it
# rejoins again and again. Kafka's client keeps a pending join (rejoinNeededOrPending).
# So: kafka-python knows the topic's partitions before its first JoinGroup (no rejoin of
# its own), and while another member joins, a poll may wait for a whole rebalance.
REBALANCE_POLL_MS = 30_000  # returns at the first record; only a rebalance waits this long


def _group_consumer(bootstrap: str, group: str, topic: str):  # type: ignore[no-untyped-def]
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                             client_id="kp-witness", enable_auto_commit=False,
                             auto_offset_reset="earliest", max_poll_records=1,
                             **KP_TIMEOUTS)
    try:
        _wait(lambda: consumer.partitions_for_topic(topic), 30,
              f"kafka-python to see the partitions of {topic}")
    except BaseException:
        consumer.close()
        raise
    return consumer


def _take(consumer, n: int) -> list:  # type: ignore[no-untyped-def]
    """Exactly ``n`` records (max_poll_records=1: the positions are what was taken)."""
    got: list = []
    deadline = time.monotonic() + 60
    while len(got) < n:
        assert time.monotonic() < deadline, f"took {len(got)} of {n} records"
        for records in consumer.poll(timeout_ms=500, max_records=1).values():
            got += records
    return got


def _ctrl_c_as_in_a_terminal() -> None:
    """SIGINT as a terminal's Ctrl-C finds it: a suite started in the background by a
    shell without job control ignores SIGINT, and its children would inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _describe_if_known(bootstrap: str, group: str) -> dict | None:
    """The group's description, None while it does not exist yet (a member still joining)."""
    result = logserver("group", "describe", group, "--json", "-b", bootstrap)
    if result.returncode == 1 and "unknown group" in result.stderr:
        return None
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _lags(described: dict) -> dict[int, tuple[int | None, int, int | None]]:
    return {p["partition"]: (p["current_offset"], p["log_end_offset"], p["lag"])
            for p in described["partitions"]}


def test_lag_is_produced_minus_consumed(module_server, topic_name) -> None:
    b = module_server.bootstrap
    group = f"g-{topic_name}"
    create_topic(b, topic_name, partitions=3)
    kp_produce(b, topic_name, [{"key": b"k%d" % i, "value": b"v%d" % i} for i in range(30)])
    ends = kp_end_offsets(b, topic_name)
    assert sum(ends.values()) == 30

    # 12 records through the CLI's own group consumer...
    out = ok("consume", topic_name, "-g", group, "--from-beginning", "-n", "12", "-b", b)
    assert len(out.splitlines()) == 12
    described = ok_json("group", "describe", group, "-b", b)
    assert described["state"] == "Empty" and described["members"] == []
    assert described["total_lag"] == 30 - 12
    for partition, (current, end, lag) in _lags(described).items():
        assert end == ends[partition]
        assert lag == (None if current is None else end - current)
    assert sum(c for c, _, _ in _lags(described).values() if c is not None) == 12

    # ... then 5 more by kafka-python in the same group, which is shown as a member.
    consumer = _group_consumer(b, group, topic_name)
    try:
        taken = _take(consumer, 5)
        consumer.commit()
        live = _wait(lambda: (d := ok_json("group", "describe", group, "-b", b))["state"] == "Stable"
                     and d, 30, "the group to be stable")
        (member,) = live["members"]
        assert member["client_id"] == "kp-witness"
        assert sorted(member["assignment"][topic_name]) == [0, 1, 2]
        assert {p["client_id"] for p in live["partitions"]} == {"kp-witness"}
        assert live["total_lag"] == 30 - 12 - len(taken)
        text = ok("group", "describe", group, "-b", b)
        assert "TOTAL-LAG      13" in text and "kp-witness" in text, text
        listed = {g["group"]: g for g in ok_json("group", "list", "-b", b)}
        assert listed[group]["state"] == "Stable"
        assert listed[group]["protocol_type"] == "consumer"

        refused = logserver("group", "reset-offsets", group, "--all-topics", "--to-earliest",
                            "--execute", "-b", b)
        assert refused.returncode == 1
        line = one_error_line(refused)
        assert f"group '{group}' is Stable with 1 member" in line, line
        busy = logserver("group", "delete", group, "-b", b)
        assert busy.returncode == 1 and "NON_EMPTY_GROUP" in one_error_line(busy)
    finally:
        consumer.close()
    done = ok_json("group", "describe", group, "-b", b)
    assert done["state"] == "Empty" and done["total_lag"] == 13


def test_reset_offsets(module_server, topic_name) -> None:
    b = module_server.bootstrap
    group = f"g-{topic_name}"
    create_topic(b, topic_name, partitions=1)
    t0 = int(time.time() * 1000) - 100_000
    kp_produce(b, topic_name, [{"value": b"v%d" % i, "timestamp_ms": t0 + i * 1000}
                               for i in range(10)])
    ok("consume", topic_name, "-g", group, "--from-beginning", "-n", "6", "-b", b)

    def current() -> int:
        return _lags(ok_json("group", "describe", group, "-b", b))[0][0]

    assert current() == 6
    plan = logserver("group", "reset-offsets", group, "--topic", topic_name, "--to-earliest",
                     "-b", b)
    assert plan.returncode == 0
    assert plan.stdout.splitlines()[0].split() == ["GROUP", "TOPIC", "PARTITION",
                                                  "CURRENT-OFFSET", "NEW-OFFSET"]
    assert plan.stdout.splitlines()[1].split() == [group, topic_name, "0", "6", "0"]
    assert "dry run" in plan.stderr
    assert current() == 6  # the default is a dry run

    def reset(*how: str) -> list[dict]:
        rows = ok_json("group", "reset-offsets", group, "--topic", f"{topic_name}:0", *how,
                       "--execute", "-b", b)
        return rows

    assert reset("--to-earliest")[0]["new_offset"] == 0 and current() == 0
    assert reset("--shift-by", "3")[0]["new_offset"] == 3 and current() == 3
    assert reset("--shift-by", "-10")[0]["new_offset"] == 0  # kept within the log
    assert reset("--to-offset", "99")[0]["new_offset"] == 10  # kept within the log
    assert reset("--to-latest")[0]["new_offset"] == 10 and current() == 10
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((t0 + 4000) / 1000))
    stamp += f".{(t0 + 4000) % 1000:03d}+00:00"
    assert reset("--to-datetime", stamp)[0]["new_offset"] == 4 and current() == 4
    rows = ok_json("group", "reset-offsets", group, "--all-topics", "--to-offset", "7",
                   "--execute", "-b", b)
    assert [(r["topic"], r["partition"], r["current_offset"], r["new_offset"]) for r in rows] \
        == [(topic_name, 0, 4, 7)]

    # A real consumer of the group starts where the reset put it.
    consumer = _group_consumer(b, group, topic_name)
    try:
        (first,) = _take(consumer, 1)
        assert first.offset == 7 and first.value == b"v7"
    finally:
        consumer.close()

    no_partition = logserver("group", "reset-offsets", group, "--topic", f"{topic_name}:5",
                             "--to-earliest", "-b", b)
    assert no_partition.returncode == 1
    assert "has no partition 5" in one_error_line(no_partition)


def test_delete_group(module_server, topic_name) -> None:
    b = module_server.bootstrap
    group = f"g-{topic_name}"
    create_topic(b, topic_name, partitions=1)
    kp_produce(b, topic_name, [{"value": b"x"}])
    ok("consume", topic_name, "-g", group, "--from-beginning", "-n", "1", "-b", b)
    assert group in {g["group"] for g in ok_json("group", "list", "-b", b)}
    assert ok_json("group", "delete", group, "-b", b) == [
        {"group": group, "status": "OK", "error": None}]
    assert group not in {g["group"] for g in ok_json("group", "list", "-b", b)}
    gone = logserver("group", "describe", group, "-b", b)
    assert gone.returncode == 1
    assert one_error_line(gone).startswith(f"logserver: unknown group '{group}'")
    again = logserver("group", "delete", group, "-b", b)
    assert again.returncode == 1 and "GROUP_ID_NOT_FOUND" in one_error_line(again)


def test_ctrl_c_ends_a_group_consumer_cleanly(module_server, topic_name) -> None:
    """A consume without -n runs until Ctrl-C; then it commits, leaves the group and
    exits 0 with Kafka's "Processed a total of N messages"."""
    b = module_server.bootstrap
    group = f"g-{topic_name}"
    create_topic(b, topic_name, partitions=2)
    kp_produce(b, topic_name, [{"value": b"v%d" % i} for i in range(7)])
    proc = subprocess.Popen(
        [sys.executable, "-m", "logserver", "consume", topic_name, "-g", group,
         "--from-beginning", "-b", b],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=str(REPO_ROOT), env=cli_env(), start_new_session=True,
        preexec_fn=_ctrl_c_as_in_a_terminal)
    try:
        def caught_up() -> bool:
            d = _describe_if_known(b, group)
            return d is not None and d["state"] == "Stable" and d["total_lag"] == 0 and \
                all(p["current_offset"] is not None for p in d["partitions"])

        _wait(caught_up, 120, "the consumer to commit everything")  # each look: a CLI process
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert sorted(out.split()) == sorted(f"v{i}" for i in range(7))
    assert err.strip() == "Processed a total of 7 messages", err
    left = ok_json("group", "describe", group, "-b", b)
    assert left["state"] == "Empty" and left["members"] == [] and left["total_lag"] == 0


def test_shares_a_group_with_kafka_python(module_server, topic_name) -> None:
    """The CLI's group consumer and kafka-python's split the partitions (kafka-python's
    leader assigns to the CLI); when kafka-python leaves, the CLI takes every partition
    (as the leader now) and reads what is left: nothing is left unread."""
    b = module_server.bootstrap
    group = f"g-{topic_name}"
    create_topic(b, topic_name, partitions=4)
    kp_produce(b, topic_name, [{"value": b"v%d" % i, "partition": i % 4} for i in range(40)])
    consumer = _group_consumer(b, group, topic_name)
    proc = None
    try:
        _wait(lambda: consumer.poll(timeout_ms=200, max_records=1) is not None
              and len(consumer.assignment()) == 4, 60, "kafka-python to own all partitions")
        proc = subprocess.Popen(
            [sys.executable, "-m", "logserver", "consume", topic_name, "-g", group,
             "--from-beginning", "-b", b],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            cwd=str(REPO_ROOT), env=cli_env(), start_new_session=True,
            preexec_fn=_ctrl_c_as_in_a_terminal)

        def split() -> dict | None:
            # kafka-python rejoins in poll(), which must not time out in the middle of it
            consumer.poll(timeout_ms=REBALANCE_POLL_MS, max_records=1)
            d = _describe_if_known(b, group)
            return d if d and d["state"] == "Stable" and len(d["members"]) == 2 else None

        shared = _wait(split, 60, "two members")
        owned = {m["client_id"]: m["assignment"].get(topic_name, []) for m in shared["members"]}
        assert sorted(owned) == ["kp-witness", "logserver-cli"]
        assert sorted(owned["kp-witness"] + owned["logserver-cli"]) == [0, 1, 2, 3]
        assert len(owned["logserver-cli"]) == 2
        consumer.commit()
    finally:
        consumer.close()
    assert proc is not None
    try:
        def alone() -> dict | None:
            d = ok_json("group", "describe", group, "-b", b)
            return d if d["state"] == "Stable" and [m["client_id"] for m in d["members"]] \
                == ["logserver-cli"] and d["total_lag"] == 0 else None

        final = _wait(alone, 60, "the CLI to own every partition and catch up")
        assert final["members"][0]["assignment"] == {topic_name: [0, 1, 2, 3]}
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert set(out.split()) <= {f"v{i}" for i in range(40)}


def test_describe_all_groups_members_and_state(module_server, topic_name) -> None:
    """kafka-consumer-groups --describe --all-groups with --members and --state: a live
    kafka-python member (Stable, its 3 partitions) and a group left with only offsets
    (Empty), both found without naming them."""
    b = module_server.bootstrap
    live, idle = f"live-{topic_name}", f"idle-{topic_name}"
    create_topic(b, topic_name, partitions=3)
    kp_produce(b, topic_name, [{"value": b"x", "partition": i} for i in range(3)])
    gone = _group_consumer(b, idle, topic_name)
    try:
        _wait(lambda: gone.poll(timeout_ms=200, max_records=1) is not None
              and len(gone.assignment()) == 3, 60, "the idle group's member to join")
        gone.commit()
    finally:
        gone.close()
    consumer = _group_consumer(b, live, topic_name)
    try:
        _wait(lambda: consumer.poll(timeout_ms=200, max_records=1) is not None
              and len(consumer.assignment()) == 3, 60, "kafka-python to own all partitions")

        def states() -> dict | None:
            consumer.poll(timeout_ms=100, max_records=1)
            rows = {r["group"]: r for r in ok_json("group", "describe", "--all-groups",
                                                   "--state", "-b", b)}
            return rows if rows.get(live, {}).get("state") == "Stable" else None

        rows = _wait(states, 60, "the live group Stable in --all-groups --state")
        assert rows[live]["members"] == 1 and rows[live]["assignment_strategy"], rows[live]
        assert rows[idle]["state"] == "Empty" and rows[idle]["members"] == 0, rows[idle]
        members = [m for m in ok_json("group", "describe", "--all-groups", "--members",
                                      "-b", b) if m["group"] in (live, idle)]
        assert [(m["group"], m["client_id"], m["partitions"]) for m in members] == [
            (live, "kp-witness", 3)], members
        text = ok("group", "describe", live, "--members", "-b", b)
        assert text.splitlines()[0].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID",
                                                "#PARTITIONS"], text
        both = ok_json("group", "describe", "--all-groups", "-b", b)
        assert {live, idle} <= {d["group"] for d in both}
    finally:
        consumer.close()
    usage = logserver("group", "describe", "-b", b)
    assert usage.returncode == 2 and "--all-groups" in one_error_line(usage)
