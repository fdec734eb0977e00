"""Node.js Kafka clients for tests: the packages pinned in tests/helpers/js/package-lock.json,
installed with ``npm ci`` the first time a test needs them (so a fresh clone's run
installs them), and the scripts beside them run with ``node``.

npm and node missing is a failure, never a skip: the test is about that client. The
install is serialised with a file lock, so parallel test workers install once. npm's
download cache is ``$LOGSERVER_TEST_NPM_CACHE`` or tests/artifacts/npm-cache (ignored).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path

JS_DIR = Path(__file__).resolve().parent / "js"
NODE_MODULES = JS_DIR / "node_modules"
NPM_CACHE = Path(os.environ.get("LOGSERVER_TEST_NPM_CACHE")
                 or Path(__file__).resolve().parents[1] / "artifacts" / "npm-cache")
INSTALL_TIMEOUT_S = 600.0


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise AssertionError(f"{name} is not installed; the Node.js client tests need node and npm "
                             f"(Debian: apt-get install nodejs npm)")
    return path


def _installed() -> bool:
    """Every package the lock file pins (optional ones aside) is in node_modules at its
    pinned version."""
    lock = json.loads((JS_DIR / "package-lock.json").read_text())
    for where, entry in lock["packages"].items():
        if not where or entry.get("optional"):
            continue
        found = JS_DIR / where / "package.json"
        if not found.exists() or json.loads(found.read_text()).get("version") != entry.get("version"):
            return False
    return True


def ensure_node_modules() -> Path:
    """tests/helpers/js/node_modules as package-lock.json pins it (``npm ci`` when it is not)."""
    npm = _tool("npm")
    _tool("node")
    with open(JS_DIR / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _installed():
            NPM_CACHE.mkdir(parents=True, exist_ok=True)
            done = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--cache", str(NPM_CACHE)],
                cwd=JS_DIR, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False)
            if done.returncode != 0:
                raise AssertionError(f"npm ci in {JS_DIR} failed ({done.returncode}):\n"
                                     f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
            if not _installed():
                raise AssertionError(f"npm ci in {JS_DIR} left packages missing")
    return NODE_MODULES


def run_node(script: str, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run tests/helpers/js/``script`` with node (modules installed first); output captured."""
    ensure_node_modules()
    return subprocess.run([_tool("node"), str(JS_DIR / script), *args], cwd=JS_DIR,
                          capture_output=True, text=True, timeout=timeout, check=False)
