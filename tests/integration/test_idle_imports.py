"""Issue 27: an idle server does not import what it does not use. A real server (the
CLI's start path: load_config, then run_server under the CLI's event loop runner) runs in
a child process that reports its ``sys.modules`` and the codecs it compiled once it
serves; then one admin /metrics scrape shows the lazy import still happens when needed."""

from __future__ import annotations

import json
import subprocess
import sys

from commonlib.childproc import free_port, python_path_env

#: Imported on first use only (kafkaproto.compression, logserver.admin.http); the crc32c
#: package's __init__ is never run (kafkaproto.crc loads its extension alone).
LAZY = ("cramjam", "lz4", "zstandard", "prometheus_client", "crc32c")

CHILD = r"""
import asyncio, json, sys, urllib.request
from kafkaproto import code_cache
from logserver.cli import _event_loop_runner
from logserver.config import load_config
from logserver.server import run_server

kafka, admin, data = sys.argv[1], sys.argv[2], sys.argv[3]
config = load_config({"listeners": f"PLAINTEXT://127.0.0.1:{kafka}", "log.dirs": data,
                      "admin.listeners": f"http://127.0.0.1:{admin}",
                      "rest.proxy.listeners": ""})

def scrape() -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=30) as r:
        return r.status

async def main() -> None:
    ready, stop = asyncio.Event(), asyncio.Event()
    server = asyncio.ensure_future(run_server(config, ready=ready, stop=stop))
    try:
        await ready.wait()
        idle = sorted(sys.modules)
        codecs = sum(code.co_filename.endswith(("encode>", "decode>"))
                     for code in code_cache._used.values())
        status = await asyncio.get_running_loop().run_in_executor(None, scrape)
        print(json.dumps({"idle": idle, "codecs": codecs, "status": status,
                          "after_scrape": sorted(sys.modules)}))
    finally:
        stop.set()
        await server

_event_loop_runner()(main())
"""


def test_an_idle_server_has_not_imported_the_lazy_modules(tmp_path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(free_port()), str(free_port()), str(tmp_path / "data")],
        env=python_path_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    idle = {name.split(".")[0] for name in report["idle"]}
    assert not idle & set(LAZY), f"imported at idle: {sorted(idle & set(LAZY))}"
    # what only `logserver --version` and crc32c's own __init__ used (~1 MB)
    assert "importlib.metadata" not in report["idle"]
    # Codecs are compiled on first use, not all ~800 before the listeners open.
    assert report["codecs"] < 100, report["codecs"]
    # The lazy import happens when it is needed: the scrape answered with the metrics.
    assert report["status"] == 200
    assert "prometheus_client" in report["after_scrape"]
