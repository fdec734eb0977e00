"""Start-up and settings: --help, bad settings exit 2 naming the setting, env vars and
config files take effect with precedence flags > env > file > defaults, SIGTERM is a
clean stop."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from helpers.clienthelpers import kp_admin, kp_produce
from helpers.serverproc import HOST, ServerProcess, ServerStartError, free_port, run_cli


def _partitions_of_new_topic(server: ServerProcess, topic: str) -> int:
    """Auto-create ``topic`` by producing to it; return its partition count."""
    kp_produce(server.bootstrap, topic, [{"value": b"x"}])
    admin = kp_admin(server.bootstrap)
    try:
        (desc,) = admin.describe_topics([topic])
        return len(desc["partitions"])
    finally:
        admin.close()


def test_help_module():
    proc = run_cli(["--help"])
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout + proc.stderr
    for name in ("log.dirs", "listeners", "num.partitions", "log.segment.bytes",
                 "log.flush.interval.messages", "--config"):
        assert name in out, f"--help does not mention {name}"


def test_help_console_script():
    exe = shutil.which("logserver")
    assert exe is not None, "console script not installed (tests/run.sh runs pip install -e .)"
    proc = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert "log.dirs" in proc.stdout


@pytest.mark.parametrize(
    "args, name",
    [
        (["--no.such.setting", "1"], "no.such.setting"),
        (["--num.partitions", "abc"], "num.partitions"),
        (["--num.partitions", "0"], "num.partitions"),
        (["--log.segment.bytes", "-5"], "log.segment.bytes"),
        (["--auto.create.topics.enable", "maybe"], "auto.create.topics.enable"),
        (["--listeners", "not-a-listener"], "listeners"),
    ],
    ids=["unknown", "not-int", "zero-partitions", "negative-segment", "bad-bool", "bad-listener"],
)
def test_bad_setting_flag_exits_2(tmp_path, args, name):
    # later flags win, so a bad --listeners after the good one is the one in force
    proc = run_cli(["--log.dirs", str(tmp_path / "data"),
                    "--listeners", f"PLAINTEXT://{HOST}:{free_port()}", *args])
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert name in proc.stderr, f"error message does not name {name}: {proc.stderr!r}"


def test_unknown_setting_in_config_file_exits_2(tmp_path):
    cfg = tmp_path / "server.properties"
    cfg.write_text(f"log.dirs={tmp_path / 'data'}\nbogus.setting.name=3\n")
    proc = run_cli(["--config", str(cfg), "--listeners", f"PLAINTEXT://{HOST}:{free_port()}"])
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "bogus.setting.name" in proc.stderr


def test_invalid_value_in_env_exits_2(tmp_path):
    proc = run_cli(["--log.dirs", str(tmp_path / "data"),
                    "--listeners", f"PLAINTEXT://{HOST}:{free_port()}"],
                   env={"LOGSERVER_NUM_PARTITIONS": "lots"})
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "num.partitions" in proc.stderr or "LOGSERVER_NUM_PARTITIONS" in proc.stderr


def test_missing_config_file_exits_2(tmp_path):
    proc = run_cli(["--config", str(tmp_path / "nope.properties")])
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "nope.properties" in proc.stderr


def test_startup_line_and_sigterm_exit_0(server):
    assert f"listening on {HOST}:{server.port}" in server.output()
    assert server.stop() == 0, server.output_tail()


def test_env_settings_take_effect(server_factory, tmp_path):
    port = free_port()
    data = tmp_path / "envdata"
    srv = server_factory(
        base_flags=False,
        port=port,
        env={
            "LOGSERVER_LOG_DIRS": str(data),
            "LOGSERVER_LISTENERS": f"PLAINTEXT://{HOST}:{port}",
            "LOGSERVER_NUM_PARTITIONS": "5",
        },
    )
    assert _partitions_of_new_topic(srv, "envtopic") == 5
    assert data.is_dir() and any(data.iterdir()), "LOGSERVER_LOG_DIRS not used"


def test_config_file_settings_take_effect(server_factory, tmp_path):
    port = free_port()
    data = tmp_path / "filedata"
    cfg = tmp_path / "server.properties"
    cfg.write_text(
        "# a Java properties file\n"
        f"listeners=PLAINTEXT://{HOST}:{port}\n"
        f"log.dirs={data}\n"
        "num.partitions = 4\n"
    )
    srv = server_factory(base_flags=False, port=port, config_file=cfg)
    assert _partitions_of_new_topic(srv, "filetopic") == 4
    assert data.is_dir() and any(data.iterdir()), "log.dirs from the config file not used"


def test_precedence_flags_env_file(server_factory, tmp_path):
    cfg = tmp_path / "server.properties"
    cfg.write_text("num.partitions=2\nlog.segment.bytes=1048576\n")
    env = {"LOGSERVER_NUM_PARTITIONS": "3"}
    # file < env
    srv = server_factory(config_file=cfg, env=env)
    assert _partitions_of_new_topic(srv, "prec1") == 3
    srv.stop()
    # env < flag
    srv2 = server_factory(config_file=cfg, env=env, settings={"num.partitions": 6})
    assert _partitions_of_new_topic(srv2, "prec2") == 6
    srv2.stop()
    # file alone beats the default (1)
    srv3 = server_factory(config_file=cfg)
    assert _partitions_of_new_topic(srv3, "prec3") == 2


def test_default_data_dir_is_cwd_data(server_factory, tmp_path):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    port = free_port()
    srv = server_factory(base_flags=False, port=port, cwd=cwd, data_dir=None,
                         log_path=tmp_path / "default-dir.log",
                         settings={"listeners": f"PLAINTEXT://{HOST}:{port}"})
    kp_produce(srv.bootstrap, "defaultdir", [{"value": b"x"}])
    assert (cwd / "data").is_dir(), "default log.dirs is not ./data"
    assert any((cwd / "data").iterdir())


def test_port_in_use_fails_cleanly(server, tmp_path):
    """A second server on a port that is taken exits non-zero with a message."""
    other = ServerProcess(tmp_path / "data2", port=server.port)
    try:
        with pytest.raises(ServerStartError) as info:
            # connect would succeed against the first server: wait for the exit instead
            other.start(wait=False)
            other.proc.wait(timeout=60)
            other.wait_ready(timeout=0.1)
        assert other.proc.returncode not in (0, None)
        assert re.search(r"(?i)in use|address|bind|errno", str(info.value)), str(info.value)
    finally:
        other.stop()


def test_unknown_env_variable_is_ignored_with_one_warning(server_factory):
    """The environment is shared (Kubernetes, Docker, shells): an unknown LOGSERVER_*
    name is warned about once, naming it, and start-up goes on; service links are quiet."""
    srv = server_factory(env={
        "LOGSERVER_NO_SUCH_THING": "1",
        "LOGSERVER_NUM_PARTITION": "7",          # a typo: warned with the right name
        "LOGSERVER_PORT": "tcp://10.96.0.12:9092",  # Kubernetes service links
        "LOGSERVER_PORT_9092_TCP": "tcp://10.96.0.12:9092",
        "LOGSERVER_PORT_9092_TCP_ADDR": "10.96.0.12",
        "LOGSERVER_SERVICE_HOST": "10.96.0.12",
        "LOGSERVER_SERVICE_PORT": "9092",
        "LOGSERVER_NUM_PARTITIONS": "2",          # a real setting still applies
    })
    assert _partitions_of_new_topic(srv, "envwarn") == 2
    out = srv.output()
    assert out.count("LOGSERVER_NO_SUCH_THING") == 1, out
    warned = [line for line in out.splitlines() if "LOGSERVER_NUM_PARTITION" in line]
    assert len(warned) == 1 and "WARNING" in warned[0], out
    assert "LOGSERVER_NUM_PARTITIONS" in warned[0] and "num.partitions" in warned[0], warned
    assert "10.96.0.12" not in out and "LOGSERVER_PORT" not in out, out
    assert "LOGSERVER_SERVICE" not in out, out


def test_service_link_env_is_not_a_setting(tmp_path):
    """LOGSERVER_PORT=tcp://... must not become a setting; the help says so."""
    proc = run_cli(["--help"])
    assert "LOGSERVER_PORT" in proc.stdout and "Kubernetes" in proc.stdout, proc.stdout


def test_log_append_time_setting(server_factory):
    """log.message.timestamp.type=LogAppendTime: the broker's clock replaces the
    producer's timestamps, and consumers are told so (timestamp type 1)."""
    import time

    from helpers.clienthelpers import kp_read

    srv = server_factory(settings={"log.message.timestamp.type": "LogAppendTime"})
    t0 = int(time.time() * 1000)
    written = kp_produce(srv.bootstrap, "lat", [{"value": b"x", "timestamp_ms": 1000}])
    t1 = int(time.time() * 1000)
    assert t0 - 1000 <= written[0].timestamp <= t1 + 1000, written  # from the response
    (rec,) = kp_read(srv.bootstrap, "lat")
    assert t0 - 1000 <= rec.timestamp <= t1 + 1000 and rec.timestamp != 1000
