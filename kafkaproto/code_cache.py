"""A disk cache of the generated codecs' compiled code, keyed by their source.

Why: a server compiles every codec it serves before it listens (about 800 functions,
0.6 s of CPU in ``compile``), and every process paid that again. Like a ``.pyc``, the
same source under the same interpreter compiles to the same code, so the code objects
are kept (``marshal``) beside the package's own ``.pyc`` files and reused by the next
process. Generating the source still happens (it also builds each codec's namespace);
only the compilation is skipped. The file holds exactly the codecs the writing process
used, so it never grows with old sources, and a cache that cannot be read or written
is simply not used.
"""

from __future__ import annotations

import hashlib
import logging
import marshal
import os
import sys
from pathlib import Path
from types import CodeType

__all__ = ["compiled", "save"]

logger = logging.getLogger(__name__)

_PATH = Path(__file__).parent / "__pycache__" / f"codecs.{sys.implementation.cache_tag}.marshal"

_loaded: dict[str, CodeType] | None = None
_used: dict[str, CodeType] = {}
_compiled_here = False


def compiled(src: str, filename: str) -> CodeType:
    """``compile(src, filename, "exec")``, from the cache when this source is in it."""
    global _compiled_here
    key = hashlib.blake2b(f"{filename}\0{src}".encode(), digest_size=16).hexdigest()
    code = _cache().get(key)
    if code is None:
        code = compile(src, filename, "exec")
        _compiled_here = True
    _used[key] = code
    return code


def save(*, force: bool = False) -> bool:
    """Write the codecs this process used, when any was compiled here. Honours
    ``PYTHONDONTWRITEBYTECODE`` unless ``force`` (a build or test step that warms the
    cache on purpose). Returns whether the file was written."""
    if not _compiled_here or (sys.dont_write_bytecode and not force):
        return False
    tmp = _PATH.with_name(f"{_PATH.name}.{os.getpid()}.tmp")
    try:
        _PATH.parent.mkdir(exist_ok=True)
        tmp.write_bytes(marshal.dumps(dict(_used)))
        os.replace(tmp, _PATH)  # atomic: a reader sees the old file or the new one
    except OSError as exc:
        logger.debug("codec cache not written to %s: %s", _PATH, exc)
        tmp.unlink(missing_ok=True)
        return False
    return True


def _cache() -> dict[str, CodeType]:
    global _loaded
    if _loaded is None:
        _loaded = _read()
    return _loaded


def _read() -> dict[str, CodeType]:
    try:
        data = marshal.loads(_PATH.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, CodeType)}
