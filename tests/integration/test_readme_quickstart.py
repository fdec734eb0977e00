"""Every command of the README's quickstart, run as written against a real server with its
bridge (only the addresses are changed to this test's own ports).

The quickstart is the first thing a newcomer pastes; a command there that fails, or
prints something else than its comment says, is a bug in the product's front door.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest
from helpers.serverproc import HOST, REPO_ROOT, ServerProcess, free_port
from helpers.waiting import wait_until

from commonlib.childproc import can_connect

pytestmark = [pytest.mark.timeout(180)]


def _quickstart() -> str:
    readme = (REPO_ROOT / "README.md").read_text()
    return readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", _quickstart(), flags=re.S)


def _commands(block: str) -> list[str]:
    """The block's commands, without their trailing comments."""
    lines = []
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            lines.append(line.split("  #", 1)[0].strip())
    return lines


def _local(command: str, kafka: str, mqtt_port: int) -> str:
    command = command.replace("127.0.0.1:9092", kafka)
    if command.startswith(("mosquitto_sub", "mosquitto_pub")):
        command = command.replace(f"-h {HOST}", f"-h {HOST} -p {mqtt_port}")
    return command


@pytest.fixture
def quickstart_server(server_factory) -> tuple[ServerProcess, int]:
    mqtt_port = free_port()
    server = server_factory(extra_args=["--mqtt-bridge", f"{HOST}:{mqtt_port}"])
    wait_until(lambda: can_connect(mqtt_port), 30, "the bridge to listen")
    return server, mqtt_port


def _env(server: ServerProcess) -> dict[str, str]:
    env = dict(os.environ, LOGSERVER_BOOTSTRAP_SERVER=server.bootstrap)
    env["PATH"] = os.pathsep.join([str(REPO_ROOT / ".venv" / "bin"), os.path.dirname(sys.executable),
                                   env.get("PATH", "")])
    return env


def _run(command: str, env: dict[str, str]) -> str:
    proc = subprocess.run(["bash", "-c", command], capture_output=True, env=env, timeout=60,
                          cwd=REPO_ROOT)
    assert proc.returncode == 0, f"{command}\n{proc.stderr.decode(errors='replace')}"
    return proc.stdout.decode()


class _Background:
    """A command the README sends to the background with ``&``; its output is collected."""

    def __init__(self, command: str, env: dict[str, str], tmp_path, name: str) -> None:
        self.out = tmp_path / f"{name}.out"
        with self.out.open("wb") as sink:
            # stdbuf: line-buffered as on a terminal, so the test sees each line as it comes
            self.proc = subprocess.Popen(["bash", "-c", f"exec stdbuf -oL {command}"], stdout=sink,
                                         stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT)

    def text(self) -> str:
        return self.out.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def test_quickstart_has_the_blocks_this_test_runs():
    assert len(_blocks("sh")) == 4 and len(_blocks("python")) == 1


def test_every_quickstart_command_does_what_its_comment_says(quickstart_server, tmp_path):
    server, mqtt_port = quickstart_server
    env = _env(server)
    kcat_block, cli_block, mqtt_block, cluster_block = _blocks("sh")

    # kcat: list, produce, read back, consume as a group (runs until interrupted)
    listing, produce, read_all, group = _commands(kcat_block)
    assert "demo" not in _run(_local(listing, server.bootstrap, mqtt_port), env)
    _run(_local(produce, server.bootstrap, mqtt_port), env)
    assert _run(_local(read_all, server.bootstrap, mqtt_port), env).splitlines() == [
        "k1 hello", "k2 world"]
    member = _Background(_local(group, server.bootstrap, mqtt_port), env, tmp_path, "group")
    try:
        wait_until(lambda: "world" in member.text(), 60, "kcat -G to print the records")
    finally:
        member.stop()
    assert "hello" in member.text()

    # the project's command line
    describe, cli_produce, consume, group_describe = _commands(cli_block)
    assert "demo" in _run(describe, env)
    _run(cli_produce, env)
    consumed = _run(consume, env)
    assert "dev-1" in consumed and "21.5" in consumed and "k1" in consumed
    assert "readers" in _run(group_describe, env)

    # kafka-python
    (python_block,) = _blocks("python")
    script = python_block.replace("127.0.0.1:9092", server.bootstrap)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert "b'k3' b'again'" in proc.stdout.decode()

    # devices over MQTT: d1 waits for commands, d2 publishes, d3 waits for broadcasts
    lines = _commands(mqtt_block)
    assert lines[-1].startswith("kill")
    background: list[_Background] = []
    try:
        for index, command in enumerate(lines[:-1]):
            command = _local(command, server.bootstrap, mqtt_port)
            if command.endswith("&"):
                # -d prints the SUBACK, so the test knows the device is subscribed
                command = command[:-1].strip().replace("mosquitto_sub", "mosquitto_sub -d", 1)
                device = _Background(command, env, tmp_path, f"device{index}")
                background.append(device)
                wait_until(lambda d=device: "SUBACK" in d.text(), 30, f"{command} to subscribe")
            elif "-t telemetry" in command:
                assert wait_until(lambda c=command: "d2" in _run(c, env) and _run(c, env), 30,
                                  "the telemetry record").strip() == 'd2 {"temp": 21.5}'
            else:
                _run(command, env)
        commands_device, ota_device = background
        wait_until(lambda: '{"cmd": "reboot"}' in commands_device.text(), 30, "d1's command")
        wait_until(lambda: "firmware 2.1 available" in ota_device.text(), 30, "d3's broadcast")
        assert "firmware" not in commands_device.text()
    finally:
        for device in background:
            device.stop()

    # the cluster command is shown with its install step; the cluster suite runs `cluster up`
    (cluster_command,) = _commands(cluster_block)
    assert "logserver cluster up --nodes 3" in cluster_command
