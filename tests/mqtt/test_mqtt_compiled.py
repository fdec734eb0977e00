"""The bridge's mypyc-compiled modules: built by the install, used while they match their
sources, and the pure-Python fallback behind them (each case in a fresh interpreter,
since a module is imported once per process)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import mqtt_bridge
from benchmarks.mypyc_build import mypyc_modules
from mqtt_bridge.compiled import PURE_ENV

REPO = Path(mqtt_bridge.__file__).resolve().parent.parent
#: the modules setup.py compiles (its MYPYC_MODULES)
COMPILED = [path.removesuffix(".py").replace("/", ".") for path in mypyc_modules()]
PROBE = ("import importlib, sys\n"
         "for name in sys.argv[1:]:\n"
         "    print(name, importlib.import_module(name).__file__)\n")


def loaded_from(cwd: Path, *, pure: bool = False) -> tuple[dict[str, str], str]:
    """Where each compiled module comes from in a fresh interpreter started in ``cwd``
    (``python -c`` puts it first on sys.path), and what that interpreter logged."""
    env = {k: v for k, v in os.environ.items() if k != PURE_ENV}
    if pure:
        env[PURE_ENV] = "1"
    done = subprocess.run([sys.executable, "-c", PROBE, *COMPILED], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60, check=True)
    found = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    return {name: Path(path).suffix for name, path in found.items()}, done.stderr


def test_the_install_compiled_every_hot_module_and_they_are_used() -> None:
    where, _ = loaded_from(REPO)
    assert where == {name: ".so" for name in COMPILED}


def test_the_environment_switch_runs_every_module_from_source() -> None:
    where, _ = loaded_from(REPO, pure=True)
    assert where == {name: ".py" for name in COMPILED}


def test_a_source_edited_after_the_build_sends_every_module_back_to_source(tmp_path: Path) -> None:
    copy = tmp_path / "mqtt_bridge"
    shutil.copytree(REPO / "mqtt_bridge", copy, ignore=shutil.ignore_patterns("__pycache__"))
    where, _ = loaded_from(tmp_path)
    assert where == {name: ".so" for name in COMPILED}  # the copy, compiled and fresh
    edited = copy / "codec" / "topics.py"
    later = time.time() + 60
    os.utime(edited, (later, later))
    where, logged = loaded_from(tmp_path)
    assert where == {name: ".py" for name in COMPILED}  # all of them, not just topics
    assert "compiled mqtt_bridge.codec.topics older than the source" in logged


def test_the_codec_tests_pass_on_the_pure_python_fallback() -> None:
    env = dict(os.environ, **{PURE_ENV: "1"})
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/mqtt/test_mqtt_codec.py", "tests/mqtt/test_mqtt_session_owners.py"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert " passed" in done.stdout
