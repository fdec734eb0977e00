"""One log format for every process: ``logserver --log-format text|json`` and the
``--mqtt-bridge`` child it supervises write lines of the same shape to the same stream
(and ``mqtt-bridge`` alone defaults to text too). Real processes, real output."""

from __future__ import annotations

import json
import re
import time

import pytest
from helpers.mqtt_procs import BridgeProcess
from helpers.serverproc import HOST, free_port

from commonlib.childproc import can_connect

pytestmark = [pytest.mark.timeout(120)]

TEXT_LINE = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"(?P<logger>[\w.]+): (?P<msg>.*)$")


def _lines(output: str) -> list[str]:
    """The process's own lines (not the test harness's ``=====`` banners)."""
    return [line for line in output.splitlines() if line.strip() and not line.startswith("=====")]


def _parse(fmt: str, line: str) -> tuple[str, str]:
    """(logger, message) of one line; fails the test if the line is not in ``fmt``."""
    if fmt == "json":
        record = json.loads(line)
        assert set(record) >= {"ts", "level", "logger", "msg"}, line
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record["ts"]), line
        return record["logger"], record["msg"]
    match = TEXT_LINE.match(line)
    assert match is not None, f"not a text log line: {line!r}"
    return match["logger"], match["msg"]


def _wait(condition, timeout: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return result


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_server_and_its_bridge_log_alike(server_factory, fmt: str) -> None:
    mqtt_port = free_port()
    server = server_factory(extra_args=["--mqtt-bridge", f"{HOST}:{mqtt_port}",
                                        "--log-format", fmt])
    _wait(lambda: can_connect(mqtt_port), 30, "the bridge to listen")
    _wait(lambda: "mqtt-bridge listening on" in server.output(), 30, "the bridge's log line")
    assert server.stop() == 0
    parsed = [_parse(fmt, line) for line in _lines(server.output())]
    loggers = {logger for logger, _ in parsed}
    assert "logserver.server" in loggers and "mqtt_bridge.bridge" in loggers, loggers
    messages = [m for _, m in parsed]
    assert any(m.startswith("started mqtt-bridge (pid ") for m in messages)
    assert "stopped cleanly" in messages
    # No line twice (the same message from two loggers, or two handlers).
    repeated = [m for m in set(messages) if messages.count(m) > 1]
    assert not repeated, repeated


def test_a_bad_setting_in_json_is_one_json_line(server_factory) -> None:
    server = server_factory(start=False, extra_args=["--log-format", "json",
                                                     "--num.partitions", "many"])
    server.spawn()
    assert server.proc is not None
    assert server.proc.wait(30) == 2
    (line,) = _lines(server.output())
    record = json.loads(line)
    assert record["level"] == "ERROR" and "num.partitions" in record["msg"], record


def test_mqtt_bridge_alone_logs_text_by_default(module_server, tmp_path) -> None:
    bridge = BridgeProcess(module_server.bootstrap, tmp_path / "bridge.log")
    try:
        bridge.start()
        _wait(lambda: "mqtt-bridge listening on" in bridge.output(), 30, "the listening line")
    finally:
        bridge.stop()
    parsed = [_parse("text", line) for line in _lines(bridge.output())]
    assert any(logger == "mqtt_bridge.bridge" for logger, _ in parsed)
