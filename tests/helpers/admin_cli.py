"""Run ``logserver`` admin commands (``python -m logserver topic ...``) as a user would."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from commonlib.childproc import REPO_ROOT, python_path_env


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This tree on PYTHONPATH, no LOGSERVER_* variable from the caller's world."""
    env = {k: v for k, v in python_path_env().items() if not k.startswith("LOGSERVER_")}
    env.update(extra or {})
    return env


def logserver(*args: str, input: str | bytes | None = None, env: dict[str, str] | None = None,
              timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """``python -m logserver ARGS`` to completion; stdout and stderr as text."""
    return subprocess.run(
        [sys.executable, "-m", "logserver", *args],
        input=input.decode() if isinstance(input, bytes) else input,
        stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True, text=True, cwd=str(REPO_ROOT), env=cli_env(env),
        timeout=timeout, start_new_session=True)


def ok(*args: str, **kwargs: Any) -> str:
    """Run a command that must succeed; its stdout."""
    result = logserver(*args, **kwargs)
    assert result.returncode == 0, (args, result.returncode, result.stdout, result.stderr)
    return result.stdout


def ok_json(*args: str, **kwargs: Any) -> Any:
    """Run a command with --json that must succeed; its parsed output."""
    return json.loads(ok(*args, "--json", **kwargs))


def json_lines(text: str) -> list[Any]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a failed command (no traceback)."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("logserver: "), lines[0]
    return lines[0]
