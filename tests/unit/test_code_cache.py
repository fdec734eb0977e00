"""The codec code cache (kafkaproto.code_cache): a second process reuses what the first
compiled, and a cache that is corrupt or stale is not used. Real files in tmp_path."""

from __future__ import annotations

import builtins
from pathlib import Path

import pytest

from kafkaproto import code_cache

SOURCE = "def f(x):\n    return x * 2\n"


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch) -> Path:
    """The module as a new process sees it, with its file in tmp_path."""
    path = tmp_path / "__pycache__" / "codecs.test.marshal"
    monkeypatch.setattr(code_cache, "_PATH", path)
    _restart(monkeypatch)
    return path


def _restart(monkeypatch) -> None:
    monkeypatch.setattr(code_cache, "_loaded", None)
    monkeypatch.setattr(code_cache, "_used", {})
    monkeypatch.setattr(code_cache, "_compiled_here", False)


def _run(code) -> int:
    ns: dict[str, object] = {}
    exec(code, ns)  # noqa: S102 - the test's own source
    return ns["f"](21)  # type: ignore[operator]


def test_the_next_process_reuses_the_compiled_code(fresh_cache, monkeypatch):
    assert _run(code_cache.compiled(SOURCE, "<test f>")) == 42
    assert code_cache.save(force=True)
    assert fresh_cache.is_file()
    _restart(monkeypatch)

    def no_compile(*args, **kwargs):
        raise AssertionError("compiled again although the cache holds this source")

    monkeypatch.setattr(builtins, "compile", no_compile)
    assert _run(code_cache.compiled(SOURCE, "<test f>")) == 42
    assert not code_cache.save(force=True)  # nothing new: the file is left as it is


def test_a_changed_source_is_compiled_and_only_used_codecs_are_kept(fresh_cache, monkeypatch):
    code_cache.compiled(SOURCE, "<test f>")
    code_cache.save(force=True)
    _restart(monkeypatch)
    changed = SOURCE.replace("2", "3")
    assert _run(code_cache.compiled(changed, "<test f>")) == 63
    assert code_cache.save(force=True)
    _restart(monkeypatch)
    assert len(code_cache._cache()) == 1  # the old source's code went with the rewrite


def test_a_corrupt_cache_is_ignored(fresh_cache):
    fresh_cache.parent.mkdir()
    fresh_cache.write_bytes(b"\x00not marshal data")
    assert _run(code_cache.compiled(SOURCE, "<test f>")) == 42


def test_dont_write_bytecode_is_honoured_unless_forced(fresh_cache, monkeypatch):
    monkeypatch.setattr("sys.dont_write_bytecode", True)
    code_cache.compiled(SOURCE, "<test f>")
    assert not code_cache.save()
    assert not fresh_cache.exists()
    assert code_cache.save(force=True)
