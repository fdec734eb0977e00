"""What a new user meets in the first hour: one clear line and the documented exit code
for the usual mistakes, real processes throughout."""

from __future__ import annotations

import socket

import pytest
from helpers.clienthelpers import kp_produce, kp_read
from helpers.serverproc import HOST, can_connect, free_port, run_cli

from logserver.config import ConfigError, load_config


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1, stderr
    return lines[0]


def test_second_server_on_a_data_directory_in_use(server):
    result = run_cli(["--log.dirs", str(server.data_dir),
                      "--listeners", f"PLAINTEXT://{HOST}:{free_port()}"])
    assert result.returncode == 1, result.stderr  # --help: 1 cannot start
    line = _one_line(result.stderr)
    assert "in use" in line and str(server.data_dir) in line, line
    assert server.running, "the first server must keep running"


def test_check_on_a_live_directory(server):
    result = run_cli(["check", str(server.data_dir)])
    assert result.returncode == 2, result.stdout + result.stderr  # help: 2 directory in use
    line = _one_line(result.stderr)
    assert "in use" in line and str(server.data_dir) in line, line
    help_text = run_cli(["check", "--help"]).stdout
    assert "2 usage error or directory in use" in " ".join(help_text.split())
    assert server.stop() == 0
    assert run_cli(["check", str(server.data_dir)]).returncode == 0


# The settings of Apache Kafka's stock config/server.properties (ZooKeeper mode, 3.x),
# and of its KRaft one, as a user copies them; our own comments.
KAFKA_ZK_PROPERTIES = """\
# --- copied from a Kafka install
broker.id=0
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs={data}
listeners=PLAINTEXT://{host}:{port}
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
#log.flush.interval.messages=10000
#log.flush.interval.ms=1000
log.retention.hours=168
#log.retention.bytes=1073741824
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
zookeeper.connect=localhost:2181
zookeeper.connection.timeout.ms=18000
group.initial.rebalance.delay.ms=0
"""

KAFKA_KRAFT_PROPERTIES = """\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@{host}:{controller_port}
listeners=PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller_port}
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://{host}:{port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs={data}
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""

ZK_IGNORED = ["num.network.threads", "num.io.threads", "socket.send.buffer.bytes",
              "socket.receive.buffer.bytes", "num.recovery.threads.per.data.dir",
              "zookeeper.connect",
              "zookeeper.connection.timeout.ms"]
KRAFT_IGNORED = [*(n for n in ZK_IGNORED if not n.startswith("zookeeper")), "process.roles",
                 "controller.quorum.voters", "inter.broker.listener.name",
                 "controller.listener.names"]


@pytest.mark.parametrize("template, ignored, node_id", [
    (KAFKA_ZK_PROPERTIES, ZK_IGNORED, 0), (KAFKA_KRAFT_PROPERTIES, KRAFT_IGNORED, 1)],
    ids=["zookeeper-mode", "kraft-mode"])
def test_a_stock_kafka_server_properties_starts(server_factory, tmp_path, template, ignored,
                                                node_id):
    port, controller_port = free_port(), free_port()
    data = tmp_path / "kafka-logs"
    cfg = tmp_path / "server.properties"
    cfg.write_text(template.format(data=data, host=HOST, port=port,
                                   controller_port=controller_port))
    srv = server_factory(base_flags=False, port=port, config_file=cfg)
    kp_produce(srv.bootstrap, "stock", [{"key": b"k", "value": b"from a Kafka config"}])
    assert [(r.key, r.value) for r in kp_read(srv.bootstrap, "stock")] == [
        (b"k", b"from a Kafka config")]
    assert (data / "stock-0").is_dir(), "log.dirs of the Kafka file not used"
    assert f"node.id={node_id}" in (data / "meta.properties").read_text()
    out = srv.output()
    for name in ignored:
        warned = [line for line in out.splitlines() if f"ignoring Kafka setting {name} " in line]
        assert len(warned) == 1 and "WARNING" in warned[0], (name, out)
    assert "ignoring Kafka setting socket.request.max.bytes" not in out  # a real setting here
    if "CONTROLLER" in template:
        assert not can_connect(controller_port), "a KRaft controller listener was opened"
        assert "CONTROLLER" in out
    assert srv.stop() == 0


def test_kafka_aliases_resolve_as_kafka_does(tmp_path):
    """Kafka's other names give our settings; the real name, then ms > minutes > hours."""
    cfg = tmp_path / "server.properties"
    cfg.write_text("broker.id=7\nlog.dir=/tmp/one\nlog.retention.hours=168\n"
                   "log.roll.hours=1\nnum.io.threads=8\n")
    config = load_config(config_file=cfg, environ={})
    assert config["node.id"] == 7 and config["log.dirs"] == "/tmp/one"
    assert config["log.retention.ms"] == 168 * 3_600_000
    assert config["log.roll.ms"] == 3_600_000
    cfg.write_text("log.retention.hours=1\nlog.retention.minutes=5\nlog.dirs=/tmp/two\n"
                   "log.dir=/tmp/one\nlog.retention.hours=-1\n")
    config = load_config(config_file=cfg, environ={})
    assert config["log.retention.ms"] == 300_000 and config["log.dirs"] == "/tmp/two"
    config = load_config({"log.retention.ms": "9"}, cfg, environ={})
    assert config["log.retention.ms"] == 9
    config = load_config(config_file=None, environ={"LOGSERVER_LOG_RETENTION_HOURS": "-1"})
    assert config["log.retention.ms"] == -1
    with pytest.raises(ConfigError, match="log.retention.hours"):
        load_config({"log.retention.hours": "a week"}, environ={})


def test_a_listener_on_every_interface_is_advertised_by_host_name():
    config = load_config({"listeners": "PLAINTEXT://0.0.0.0:9092"}, environ={})
    assert config["listeners"][0].host == "0.0.0.0"
    bound = config.with_bound_ports([9092])
    assert [(li.host, li.port) for li in bound.advertised] == [(socket.getfqdn(), 9092)]


@pytest.mark.parametrize("args, use", [
    (["--port", "9092"], "--listeners PLAINTEXT://HOST:PORT"),
    (["--listen", "0.0.0.0:9092"], "--listeners PLAINTEXT://HOST:PORT"),
    (["--host", "127.0.0.1"], "--listeners PLAINTEXT://HOST:PORT"),
    (["--data-dir", "/tmp/x"], "--log.dirs DIR"),
    (["--data-dir=/tmp/x"], "--log.dirs DIR"),
    (["--log-segment-bytes", "5"], "--log.segment.bytes"),
    (["--num.partitons", "3"], "--num.partitions"),
])
def test_other_servers_flags_name_the_setting_to_use(args, use):
    result = run_cli(args)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert f"unknown flag {args[0].split('=')[0]}" in error and use in error, result.stderr
    assert len(result.stderr.strip().splitlines()) <= 3, result.stderr  # not the whole usage


def test_kafka_alias_flags_work(server_factory, tmp_path):
    data, port = tmp_path / "alias-data", free_port()
    srv = server_factory(base_flags=False, port=port, settings={
        "log.dir": data, "listeners": f"PLAINTEXT://{HOST}:{port}", "broker.id": 5,
        "log.retention.hours": 1})
    kp_produce(srv.bootstrap, "aliased", [{"value": b"x"}])
    assert (data / "aliased-0").is_dir()
    assert "node.id=5" in (data / "meta.properties").read_text()


def test_manual_documents_every_file_the_server_writes(server):
    """Each file a real server leaves in its data directory has a row in the manual."""
    from helpers.serverproc import REPO_ROOT

    kp_produce(server.bootstrap, "layout", [{"key": b"k", "value": b"v"}])
    seen = {p.name for p in server.data_dir.iterdir()}
    assert server.stop() == 0
    manual = (REPO_ROOT / "docs" / "operations.md").read_text()
    section = manual.split("## Data directory", 1)[1].split("\n## ", 1)[0]
    top = {p.name for p in server.data_dir.iterdir()} | seen
    for name in top:
        if (server.data_dir / name).is_dir():
            assert "`TOPIC-PARTITION/`" in section
            for file in (server.data_dir / name).iterdir():
                suffix = file.name.split(".", 1)[1]
                assert f".{suffix}`" in section, f"{name}/{file.name} is not documented"
        else:
            assert f"`{name}`" in section, f"{name} is not documented"
    assert ".kafka_cleanshutdown" in top and ".lock" in top
