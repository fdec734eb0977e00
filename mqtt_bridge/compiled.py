"""Use the mypyc-compiled hot modules only while they match their sources.

``setup.py`` compiles the codec and the routing modules with mypyc (16-22% more
messages per second through the bridge, benchmarks/README.md); the ``.py`` files stay
beside the compiled ones as the fallback. Python prefers an extension module to a
source file of the same name, so a source edited after the build would be ignored.
Before any of them is imported, :func:`prefer_sources_when_stale` checks the pairs:
when one source is newer than its build, or ``MQTT_BRIDGE_PURE_PYTHON=1`` (py-spy sees
inside interpreted code only), every compiled module is loaded from its source, all
together, because compiled modules of one build call each other directly and mixing
them with interpreted copies would give two classes per packet type.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import logging
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

log = logging.getLogger(__name__)

PURE_ENV = "MQTT_BRIDGE_PURE_PYTHON"
#: a source this much newer than its build is an edit (installs write both at once)
STALE_AFTER_S = 2.0
PACKAGE = Path(__file__).resolve().parent


def compiled_pairs(package: Path = PACKAGE) -> dict[str, tuple[Path, Path]]:
    """Module name -> (compiled file, source file) for every compiled module beside its
    source under ``package`` (the build's shared ``*__mypyc`` library has no source)."""
    pairs: dict[str, tuple[Path, Path]] = {}
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        for built in package.rglob(f"*{suffix}"):
            source = built.with_name(built.name[: -len(suffix)] + ".py")
            if source.exists():
                parts = source.relative_to(package.parent).with_suffix("").parts
                pairs.setdefault(".".join(parts), (built, source))
    return pairs


def stale_modules(pairs: dict[str, tuple[Path, Path]]) -> list[str]:
    return sorted(name for name, (built, source) in pairs.items()
                  if source.stat().st_mtime > built.stat().st_mtime + STALE_AFTER_S)


class _SourcesFirst(importlib.abc.MetaPathFinder):
    """Finds the listed modules at their ``.py`` files, ahead of the path finder."""

    def __init__(self, sources: dict[str, Path]) -> None:
        self.sources = sources

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        source = self.sources.get(fullname)
        return None if source is None else importlib.util.spec_from_file_location(fullname, source)


def prefer_sources_when_stale(package: Path = PACKAGE) -> bool:
    """Load every compiled module from source if one is stale or the environment asks;
    True when the sources are used."""
    pairs = compiled_pairs(package)
    if not pairs:
        return False
    pure = os.environ.get(PURE_ENV, "") not in ("", "0")
    stale = [] if pure else stale_modules(pairs)
    if not pure and not stale:
        return False
    if stale:
        log.warning("compiled %s older than the source; running all %d compiled modules "
                    "from source (rebuild: pip install -e .)", ", ".join(stale), len(pairs))
    sys.meta_path.insert(0, _SourcesFirst({name: source for name, (_, source) in pairs.items()}))
    return True
