"""A module imported on its first attribute access, then put in its user's globals.

Why: the compression libraries (and their Rust/C extensions) cost a few MB of memory in
every process that imports ``kafkaproto``, though most never see a compressed batch
(issue 27). The stand-in replaces itself in the importing module's namespace with the
real module on first use, so later calls pay nothing.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__ = ["LazyModule"]


class LazyModule:
    """Stands for module ``name`` in ``namespace`` until an attribute is read from it.

    ``load`` is what to import when it differs from ``name`` (``lz4.frame`` for ``lz4``,
    so ``lz4.frame`` resolves as after ``import lz4.frame``).
    """

    def __init__(self, name: str, namespace: dict[str, Any], load: str | None = None) -> None:
        self._name = name
        self._namespace = namespace
        self._load = load or name

    def _module(self) -> ModuleType:
        importlib.import_module(self._load)
        module = importlib.import_module(self._name)
        if self._namespace.get(self._name) is self:
            self._namespace[self._name] = module
        return module

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(self._module(), attr)
