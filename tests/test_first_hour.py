"""What a new user meets in the first hour: one clear line and the documented exit code
for the usual mistakes, real processes throughout."""

from __future__ import annotations

from serverproc import HOST, free_port, run_cli


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
