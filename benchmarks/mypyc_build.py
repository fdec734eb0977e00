"""A mypyc-compiled copy of the bridge's hot modules, for ``mqtt_bench --mypyc``.

Issue 14 asks whether compiling the MQTT codec and routing with mypyc pays. The
benchmark answers it on the real load: the bridge runs once from the source tree and
once with a copy of ``mqtt_bridge`` whose hot modules are compiled put first on its
``PYTHONPATH`` (the .py files stay, so nothing here changes how the project installs).
"""

from __future__ import annotations

import ast
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

from commonlib.childproc import REPO_ROOT, python_path_env

log = logging.getLogger(__name__)


def mypyc_modules() -> list[str]:
    """The source files setup.py compiles (its ``MYPYC_MODULES``: one list, read from the
    file, since importing setup.py would run the build)."""
    tree = ast.parse((REPO_ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "MYPYC_MODULES" for t in node.targets):
            return [str(x) for x in ast.literal_eval(node.value)]
    raise MypycUnavailable("setup.py names no MYPYC_MODULES")


class MypycUnavailable(RuntimeError):
    """mypyc is missing or failed to compile the modules."""


def build_compiled_bridge(dest: Path) -> Path:
    """Copy ``mqtt_bridge`` under ``dest`` and compile :func:`mypyc_modules` in place;
    the directory to put first on the bridge's ``PYTHONPATH``."""
    if importlib.util.find_spec("mypyc") is None:
        raise MypycUnavailable("mypyc not installed (it comes with mypy: pip install mypy)")
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO_ROOT / "mqtt_bridge", dest / "mqtt_bridge",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"), dirs_exist_ok=True)
    modules = mypyc_modules()
    log.info("compiling %d bridge modules with mypyc", len(modules))
    env = python_path_env()
    done = subprocess.run([sys.executable, "-m", "mypyc", *modules],
                          cwd=dest, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise MypycUnavailable(f"mypyc failed: {(done.stderr or done.stdout).strip()[-400:]}")
    shutil.rmtree(dest / "build", ignore_errors=True)
    probe = subprocess.run([sys.executable, "-c", "import mqtt_bridge.codec.decoder as m; print(m.__file__)"],
                           env=compiled_env(dest), cwd=dest, capture_output=True, text=True,
                           timeout=60)
    if not probe.stdout.strip().endswith(".so"):
        raise MypycUnavailable(f"the compiled decoder does not load: {probe.stdout}{probe.stderr}"[-400:])
    return dest


def compiled_env(tree: Path) -> dict[str, str]:
    """Our children's environment with the compiled copy ahead of the source tree. Start
    them in ``tree`` too: ``python -m``/``-c`` put the working directory first on sys.path."""
    env = python_path_env()
    env["PYTHONPATH"] = os.pathsep.join((str(tree), env["PYTHONPATH"]))
    return env
