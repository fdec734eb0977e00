"""``logserver topic ...``, ``cluster info``, ``--version``, ``--help`` and the errors of
the admin commands, against a real server, checked with a real client (kafka-python)."""

from __future__ import annotations

import json
import re

import pytest
from helpers.admin_cli import logserver, ok, ok_json, one_error_line
from helpers.clienthelpers import kp_admin, kp_consumer, kp_end_offsets, kp_produce
from helpers.serverproc import HOST, free_port

pytestmark = pytest.mark.timeout(120)


def _kp_topics(bootstrap: str) -> set[str]:
    admin = kp_admin(bootstrap)
    try:
        return set(admin.list_topics())
    finally:
        admin.close()


def test_create_list_describe_delete(module_server, topic_name) -> None:
    b = module_server.bootstrap
    out = ok("topic", "create", topic_name, "-p", "2", "-c", "retention.ms=3600000", "-b", b)
    assert re.search(rf"^{re.escape(topic_name)}\s+OK$", out, re.M), out
    assert topic_name in _kp_topics(b)  # a real client sees it

    listed = {t["name"]: t for t in ok_json("topic", "list", "-b", b)}
    assert listed[topic_name] == {"name": topic_name, "partitions": 2, "replicas": 1,
                                  "internal": False}
    table = ok("topic", "list", "-b", b)
    assert table.splitlines()[0].split() == ["NAME", "PARTITIONS", "REPLICAS"]
    assert re.search(rf"^{re.escape(topic_name)}\s+2\s+1$", table, re.M), table

    sent = kp_produce(b, topic_name, [{"value": b"v%d" % i, "partition": i % 2} for i in range(5)])
    described = ok_json("topic", "describe", topic_name, "-b", b)
    ends = kp_end_offsets(b, topic_name)
    assert [(p["partition"], p["log_start_offset"], p["high_watermark"])
            for p in described["partitions"]] == [(0, 0, ends[0]), (1, 0, ends[1])]
    assert sum(ends.values()) == len(sent) == 5
    configs = {c["name"]: c for c in described["configs"]}
    assert configs["retention.ms"]["value"] == "3600000"
    assert configs["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["cleanup.policy"]["source"] == "DEFAULT_CONFIG"
    text = ok("topic", "describe", topic_name, "-b", b)
    assert "PARTITIONS\n==========" in text and "HIGH-WATERMARK" in text, text

    out = ok("topic", "delete", topic_name, "-b", b)
    assert re.search(rf"^{re.escape(topic_name)}\s+OK$", out, re.M), out
    assert topic_name not in _kp_topics(b)


def test_create_an_existing_topic_names_the_error(module_server, topic_name) -> None:
    b = module_server.bootstrap
    ok("topic", "create", topic_name, "-b", b)
    again = logserver("topic", "create", topic_name, "-b", b)
    assert again.returncode == 1
    line = one_error_line(again)
    assert f"'{topic_name}'" in line and "TOPIC_ALREADY_EXISTS" in line, line
    quiet = ok_json("topic", "create", topic_name, "--if-not-exists", "-b", b)
    assert quiet == [{"topic": topic_name, "status": "EXISTS", "error": None}]


def test_bad_topic_requests_fail_with_one_line(module_server, topic_name) -> None:
    b = module_server.bootstrap
    missing = logserver("topic", "describe", topic_name, "-b", b)
    assert missing.returncode == 1
    assert one_error_line(missing) == f"logserver: unknown topic '{topic_name}'"

    delete = logserver("topic", "delete", topic_name, "-b", b)
    assert delete.returncode == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in one_error_line(delete)
    assert ok_json("topic", "delete", topic_name, "--if-exists", "-b", b)[0]["status"] == "ABSENT"

    bad_config = logserver("topic", "create", topic_name, "-c", "retention.ms=soon", "-b", b)
    assert bad_config.returncode == 1
    assert "INVALID_CONFIG" in one_error_line(bad_config)
    assert topic_name not in _kp_topics(b)

    malformed = logserver("topic", "create", topic_name, "-c", "retention.ms", "-b", b)
    assert malformed.returncode == 2
    assert "KEY=VALUE" in one_error_line(malformed)


def test_unreachable_server_is_one_line_and_exit_3() -> None:
    port = free_port()  # nothing listens there
    for command in (["topic", "list"], ["group", "list"], ["cluster", "info"],
                    ["consume", "x", "-n", "1"]):
        result = logserver(*command, "-b", f"{HOST}:{port}")
        assert result.returncode == 3, (command, result.stderr)
        line = one_error_line(result)
        assert line.startswith(f"logserver: cannot connect to {HOST}:{port}: "), line


def test_cluster_info(module_server) -> None:
    info = ok_json("cluster", "info", "-b", module_server.bootstrap)
    assert info["brokers"] == [{"node_id": 1, "host": HOST, "port": module_server.port,
                                "rack": None}]
    assert info["controller"] == 1 and info["cluster_id"]
    text = ok("cluster", "info", "-b", module_server.bootstrap)
    assert f"CLUSTER     {info['cluster_id']}" in text
    assert re.search(rf"^1\s+{HOST}\s+{module_server.port}\s+-$", text, re.M), text


def test_bootstrap_server_from_the_environment(module_server, server_factory) -> None:
    """LOGSERVER_BOOTSTRAP_SERVER picks the server; the server itself does not take it
    for a setting (no warning)."""
    env = {"LOGSERVER_BOOTSTRAP_SERVER": module_server.bootstrap}
    info = ok_json("cluster", "info", env=env)
    assert info["brokers"][0]["port"] == module_server.port
    other = server_factory(env=env)
    assert "LOGSERVER_BOOTSTRAP_SERVER" not in other.output()


def test_version() -> None:
    from importlib.metadata import version

    out = ok("--version")
    assert out.strip() == f"logserver {version('logserver')}"


COMMANDS = [
    ["topic"], ["topic", "list"], ["topic", "describe"], ["topic", "create"],
    ["topic", "delete"], ["topic", "alter-config"], ["topic", "add-partitions"],
    ["group"], ["group", "list"], ["group", "describe"], ["group", "reset-offsets"],
    ["group", "delete"], ["produce"], ["consume"], ["cluster"], ["cluster", "info"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_on_every_command(command: list[str]) -> None:
    out = ok(*command, "--help")
    assert out.startswith(f"usage: logserver {' '.join(command)}"), out
    assert "Exit codes: 0 done" in " ".join(out.split())
    if len(command) == 2 or command[0] in ("produce", "consume"):
        assert "--bootstrap-server" in out and "--json" in out


def test_usage_errors_exit_2() -> None:
    result = logserver("topic", "frobnicate")
    assert result.returncode == 2 and "invalid choice: 'frobnicate'" in result.stderr
    assert logserver("group", "reset-offsets", "g", "--all-topics").returncode == 2  # no --to-*


def test_server_options_still_work_beside_the_commands() -> None:
    """`logserver --help` still documents the server, and names the admin commands."""
    out = ok("--help")
    assert "--log.dirs" in out and "check DIR" in out
    assert "`logserver topic`" in " ".join(out.split())


def _kp_start_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """Each partition's log start offset, as kafka-python's consumer sees it."""
    from kafka import TopicPartition

    consumer = kp_consumer(bootstrap)
    try:
        found = consumer.beginning_offsets([TopicPartition(topic, p) for p in range(partitions)])
        return [found[TopicPartition(topic, p)] for p in range(partitions)]
    finally:
        consumer.close()


def test_delete_records(module_server, topic_name, tmp_path) -> None:
    """topic delete-records: TOPIC:P=OFFSET moves one partition's start, TOPIC=-1 every
    partition's to its high watermark, kafka-delete-records' JSON file works; a real
    client (kafka-python) sees the new log start offsets."""
    b = module_server.bootstrap
    ok("topic", "create", topic_name, "-p", "2", "-b", b)
    kp_produce(b, topic_name, [{"value": b"r", "partition": i % 2} for i in range(20)])
    [row] = ok_json("topic", "delete-records", f"{topic_name}:0=4", "-b", b)
    assert row == {"topic": topic_name, "partition": 0, "low_watermark": 4, "error": None}
    assert _kp_start_offsets(b, topic_name, 2) == [4, 0]
    plan = tmp_path / "offsets.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic_name, "partition": 1, "offset": 7}]}))
    ok("topic", "delete-records", "--offset-json-file", str(plan), "-b", b)
    assert _kp_start_offsets(b, topic_name, 2) == [4, 7]
    rows = ok_json("topic", "delete-records", f"{topic_name}=-1", "-b", b)
    assert [r["low_watermark"] for r in rows] == [10, 10]
    assert _kp_start_offsets(b, topic_name, 2) == [10, 10]
    bad = logserver("topic", "delete-records", f"{topic_name}:x=3", "-b", b)
    assert bad.returncode == 2 and "TOPIC[:PARTITION]=OFFSET" in one_error_line(bad)
    beyond = logserver("topic", "delete-records", f"{topic_name}:0=999", "-b", b)
    assert beyond.returncode == 1 and "OFFSET_OUT_OF_RANGE" in beyond.stderr, beyond.stderr
