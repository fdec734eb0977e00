"""CRC-32C (record batches), from the ``crc32c`` package's extension module alone.

Why: the package's ``__init__`` asks ``importlib.metadata`` for its own version and
imports its command line, which brings in ``importlib.metadata``, ``email``, ``zipfile``
and ``csv``: about 1 MB in every process that imports ``kafkaproto``, for a function
that is one C call (issue 27). The extension is loaded from the package's folder without
running the package; where that fails (another layout), the package is imported as usual.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
from collections.abc import Callable

__all__ = ["crc32c"]


def _load() -> Callable[..., int]:
    spec = importlib.util.find_spec("crc32c")  # finds the package without running it
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, "_crc32c" + suffix)
            if not os.path.exists(path):
                continue
            loader = importlib.machinery.ExtensionFileLoader("crc32c._crc32c", path)
            ext_spec = importlib.util.spec_from_file_location("crc32c._crc32c", path, loader=loader)
            if ext_spec is None:
                continue
            try:
                module = importlib.util.module_from_spec(ext_spec)
                loader.exec_module(module)
            except ImportError:
                continue
            func: Callable[..., int] = module.crc32c
            return func
    from crc32c import crc32c as packaged  # noqa: PLC0415 - the usual way, as a fallback

    return packaged


crc32c = _load()
