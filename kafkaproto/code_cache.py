"""A disk cache of the generated codecs' compiled code, keyed by their source.

Why: a server compiles every codec it serves before it listens (about 800 functions,
0.6 s of CPU in ``compile``), and every process paid that again. Like a ``.pyc``, the
same source under the same interpreter compiles to the same code, so the code objects
are kept (``marshal``) beside the package's own ``.pyc`` files and reused by the next
process. Generating the source still happens (it also builds each codec's namespace);
only the compilation is skipped. The file holds exactly the codecs the writing process
used, so it never grows with old sources, and a cache that cannot be read or written
is simply not used.

The file is an index (key -> offset, length) followed by one marshalled ``(key, code)``
per codec: a process reads the index, then only the codecs it uses, one read each, so a
server that compiles codecs on first use does not hold all ~800 in memory (issue 27).
A codec read back must name its key, so a file replaced meanwhile is never misread.
"""

from __future__ import annotations

import hashlib
import logging
import marshal
import os
import struct
import sys
from pathlib import Path
from types import CodeType

__all__ = ["compiled", "save"]

logger = logging.getLogger(__name__)

_PATH = Path(__file__).parent / "__pycache__" / f"codecs.{sys.implementation.cache_tag}.marshal"

#: Start of the file: magic and the index's length.
_HEADER = struct.Struct(">4sI")
_MAGIC = b"KPC2"

#: The cache file's index, read once: key -> (offset, length) of its ``(key, code)``.
_loaded: dict[str, tuple[int, int]] | None = None
_used: dict[str, CodeType] = {}
_compiled_here = False


def compiled(src: str, filename: str) -> CodeType:
    """``compile(src, filename, "exec")``, from the cache when this source is in it."""
    global _compiled_here
    key = hashlib.blake2b(f"{filename}\0{src}".encode(), digest_size=16).hexdigest()
    code = _code(key)
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
        tmp.write_bytes(_pack(_used))
        os.replace(tmp, _PATH)  # atomic: a reader sees the old file or the new one
    except OSError as exc:
        logger.debug("codec cache not written to %s: %s", _PATH, exc)
        tmp.unlink(missing_ok=True)
        return False
    return True


def _pack(codes: dict[str, CodeType]) -> bytes:
    """The file's bytes: header, index, then each ``(key, code)`` marshalled."""
    blobs = [(key, marshal.dumps((key, code))) for key, code in codes.items()]
    index: dict[str, tuple[int, int]] = {}
    # Offsets count from the end of the index, whose own length depends on them.
    pos = 0
    for key, blob in blobs:
        index[key] = (pos, len(blob))
        pos += len(blob)
    head = marshal.dumps(index)
    return b"".join([_HEADER.pack(_MAGIC, len(head)), head, *(b for _, b in blobs)])


def _code(key: str) -> CodeType | None:
    """The cached code of ``key``, read from the file now, or None."""
    where = _cache().get(key)
    if where is None:
        return None
    offset, length = where
    try:
        with open(_PATH, "rb") as f:
            f.seek(offset)
            entry = marshal.loads(f.read(length))
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if isinstance(entry, tuple) and len(entry) == 2 and entry[0] == key \
            and isinstance(entry[1], CodeType):
        return entry[1]
    return None  # the file was replaced since its index was read


def _cache() -> dict[str, tuple[int, int]]:
    global _loaded
    if _loaded is None:
        _loaded = _read()
    return _loaded


def _read() -> dict[str, tuple[int, int]]:
    """The index, with offsets made absolute; empty when the file is missing or not ours."""
    try:
        with open(_PATH, "rb") as f:
            magic, size = _HEADER.unpack(f.read(_HEADER.size))
            if magic != _MAGIC:
                return {}
            data = marshal.loads(f.read(size))
    except (OSError, EOFError, ValueError, TypeError, struct.error):
        return {}
    if not isinstance(data, dict):
        return {}
    base = _HEADER.size + size
    return {k: (base + v[0], v[1]) for k, v in data.items()
            if isinstance(k, str) and isinstance(v, tuple) and len(v) == 2
            and all(isinstance(n, int) for n in v)}
