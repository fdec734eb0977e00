"""Errors a new operator meets at start-up get one clear line (and the right exit code),
never a traceback; `logserver check` flags a data directory start-up would refuse. Real
``python -m logserver`` processes."""

from __future__ import annotations

import json

import pytest
from helpers.clienthelpers import create_topic
from helpers.serverproc import HOST, free_port, run_cli
from helpers.waiting import wait_until

pytestmark = pytest.mark.timeout(120)


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1, stderr
    return lines[0]


def _start(data_dir, *extra: str):
    return run_cli(["--log.dirs", str(data_dir), "--listeners", f"PLAINTEXT://{HOST}:{free_port()}",
                    "--admin.listeners", "", *extra])


@pytest.mark.parametrize("setting", ["node.id", "num.partitions", "log.segment.bytes"])
def test_a_non_integer_setting_says_an_integer_is_expected(tmp_path, setting):
    result = _start(tmp_path / "data", f"--{setting}", "abc")
    assert result.returncode == 2
    line = _one_line(result.stderr)
    assert setting in line and "expected an integer, got 'abc'" in line


def test_log_dirs_naming_a_file_says_it_is_not_a_directory(tmp_path):
    afile = tmp_path / "not-a-dir"
    afile.write_text("x")
    result = _start(afile)
    assert result.returncode == 2
    assert "is a file, not a directory" in _one_line(result.stderr)


@pytest.mark.parametrize("content, says", [
    ("{bad json", "is not a readable topic list"),
    (json.dumps({"version": 7, "topics": {}}), "a data directory of another version"),
    (json.dumps({"version": 1, "topics": {"t": {"partitions": 1}}}), "is not a readable topic list"),
])
def test_a_bad_topic_list_refuses_start_in_one_line_and_check_flags_it(tmp_path, content, says):
    data = tmp_path / "data"
    data.mkdir()
    (data / "__topics.json").write_text(content)
    result = _start(data)
    assert result.returncode == 1
    line = _one_line(result.stderr)
    assert says in line and "logserver check" in line
    check = run_cli(["check", str(data)])
    assert check.returncode == 1, check.stdout
    assert "__topics.json" in check.stdout and "start-up will refuse" in check.stdout


def test_a_topic_below_min_insync_replicas_is_warned_about_at_create_time(server):
    create_topic(server.bootstrap, "fragile", partitions=1)  # broker default min ISR 1: quiet
    assert "below min.insync.replicas" not in server.output()
    result = run_cli(["topic", "create", "fragile2", "-c", "min.insync.replicas=2",
                      "-b", server.bootstrap])
    assert result.returncode == 0, result.stderr
    wait_until(lambda: "topic fragile2: replication factor 1 is below min.insync.replicas 2"
               in server.output(), 30, "the warning in the server's log")


def test_another_nodes_data_directory_refuses_start_in_one_line_and_check_flags_it(tmp_path):
    """A data directory written by node.id 1, started as node.id 2: Kafka's "doesn't match
    stored node.id" in one line, exit 1; `logserver check --node.id 2` says start-up
    will refuse it, `--node.id 1` finds it clean."""
    data = tmp_path / "data"
    data.mkdir()
    # as node 1 wrote it at its first start (cluster_meta.write_cluster_id)
    (data / "meta.properties").write_text(
        "version=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\nnode.id=1\n")
    result = _start(data, "--node.id", "2", "--rest.proxy.listeners", "")
    assert result.returncode == 1, result.stderr
    line = _one_line(result.stderr)
    assert "Configured node.id 2 doesn't match stored node.id 1" in line, line
    assert str(data / "meta.properties") in line
    check = run_cli(["check", str(data), "--node.id", "2"])
    assert check.returncode == 1, check.stdout
    assert "doesn't match stored node.id 1" in check.stdout
    assert "start-up will refuse this directory: it is another node's" in check.stdout
    assert run_cli(["check", str(data), "--node.id", "1"]).returncode == 0


@pytest.mark.parametrize("command", [["topic", "list"], ["group", "describe", "g"],
                                     ["cluster", "health"], ["scram", "list"],
                                     ["cluster", "up"], ["check", "."]])
def test_a_sub_commands_bad_flag_prints_that_sub_commands_usage(command):
    result = run_cli([*command, "--bogus"])
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    prog = "logserver " + " ".join(command[:2] if command[0] != "check" else command[:1])
    assert result.stderr.startswith(f"usage: {prog} "), result.stderr
    assert f"{prog}: error: unrecognized arguments: --bogus" in result.stderr
