"""Chromium for the browser tests (Playwright drives Debian's /usr/bin/chromium) and the
directory their screenshots and traces go to (ARTIFACTS_DIR, else tests/artifacts)."""

from __future__ import annotations

import os
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"


def artifacts_dir() -> Path:
    where = Path(os.environ.get("ARTIFACTS_DIR") or Path(__file__).parents[1] / "artifacts")
    where.mkdir(parents=True, exist_ok=True)
    return where
